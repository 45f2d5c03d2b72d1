"""Nodes: the audit report: per contract pass/fail, counts and the violating ids; and
the contract_audit graph's reply."""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import node
from nodes.evaluate_contracts.audit_contracts import CONTRACTS, empty_findings
from nodes.publish.wording import counted

__all__ = ["AuditSummary", "audit_reply", "audit_report"]


class AuditSummary(TypedDict):
    """The audit's report: whether every contract holds, the scope, the pages read,
    per contract its counts and violating ids, and the same as text."""

    passed: bool
    scope: str
    session_id: str | None
    pages: int
    contracts: list[dict[str, Any]]
    text: str


class AuditReportWrites(TypedDict):
    report: AuditSummary


@node
def audit_report(audit: Any, findings: Any, pages: Any) -> AuditReportWrites:
    findings = findings or empty_findings()
    contracts = [
        {"name": name, "description": description,
         "passed": findings[name]["violations"] == 0, **findings[name]}
        for name, description in CONTRACTS.items()
    ]
    passed = all(c["passed"] for c in contracts)
    scope = "whole store" if audit["session"] is None else f"session {audit['session']!r}"
    failed = [c for c in contracts if not c["passed"]]
    lines = [
        f"Audit of the {scope}: " + (
            f"all {counted(len(contracts), 'contract')} hold" if passed
            else f"{len(failed)} of {counted(len(contracts), 'contract')} violated"),
    ]
    for c in contracts:
        mark = "ok  " if c["passed"] else "FAIL"
        line = f"{mark} {c['name']}: {c['checked']:,} checked"
        if not c["passed"]:
            shown = ", ".join(f"#{i}" for i in c["ids"][:20])
            more = "…" if len(c["ids"]) > 20 or c["violations"] > len(c["ids"]) else ""
            line += f", {counted(c['violations'], 'violation')}" + (
                f": {shown}{more}" if shown else "")
        lines.append(line)
        lines.extend(f"     {d}" for d in c["details"][:3] if not c["passed"])
    return {"report": AuditSummary(passed=passed, scope=scope, session_id=audit["session"],
                                   pages=pages or 0, contracts=contracts,
                                   text="\n".join(lines))}


class AuditReplyWrites(TypedDict):
    reply: AuditSummary


@node
def audit_reply(report: AuditSummary) -> AuditReplyWrites:
    """The report as the contract_audit graph's output (migrate, which runs the same
    stages after its copy, answers with its own reply that holds the report)."""
    return {"reply": report}
