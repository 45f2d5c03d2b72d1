# Omega Stenographer MCP server.
#
#   docker build -t omega-stenographer .
#   stdio (what MCP hosts launch; -i keeps stdin open):
#     docker run -i --rm -v steno-data:/data omega-stenographer
#   Streamable HTTP on all interfaces (needs a token and both allowlists, see docs/security.md):
#     docker run --rm -p 8765:8765 -v steno-data:/data \
#       -e STENO_HTTP_TOKEN_FILE=/run/secrets/steno_token \
#       -e STENO_ALLOWED_HOSTS=localhost:8765 -e STENO_ALLOWED_ORIGINS=http://localhost:8765 \
#       omega-stenographer --http --host 0.0.0.0 --port 8765
#   other commands: docker run --rm -v steno-data:/data --entrypoint stenographer \
#     omega-stenographer doctor
FROM python:3.12-slim

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    OMEGA_STENOGRAPHER_DIR=/data

WORKDIR /src
COPY pyproject.toml setup.py README.md constraints.txt ./
COPY stenographer ./stenographer
COPY graphs ./graphs
COPY nodes ./nodes
COPY store ./store
COPY constants ./constants
# a C compiler and SQLite's headers build store/sqlite/bm25_top.c, then leave the image
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev libsqlite3-dev \
    && pip install -c constraints.txt . \
    && apt-get purge -y --auto-remove gcc libc6-dev libsqlite3-dev \
    && rm -rf /var/lib/apt/lists/* /src \
    && useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin steno \
    && mkdir -p /data \
    && chown steno:steno /data \
    && chmod 700 /data

USER steno
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8765

# `stenographer serve`: stdio by default; `--http --host 0.0.0.0` for HTTP.
ENTRYPOINT ["stenographer", "serve"]
