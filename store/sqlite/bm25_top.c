/*
** bm25_top(fts, k, w0, w1, ..., [counts]): FTS5's bm25(fts, w0, w1, ...), the same value
** computed the same way (SQLite's ext/fts5/fts5_aux.c), for the rows that can be among
** the k best of the statement; 1.0 (above any bm25() value with weights of 0 or more,
** never positive) for a row that cannot be.
**
** counts (optional, a BLOB as its last argument): the table's row count, the keyword
** index's epoch, then each phrase's count, native 64-bit integers, two more than the
** phrases; -1 for a phrase not given; -2 for a phrase that only selects rows and adds
** nothing to their scores (a repeat of phrases scored elsewhere in the expression:
** store.sqlite.search's statement that leaves the commonest phrases to the rows holding
** a rarer one). bm25() counts every phrase's rows over the whole
** table for its IDF (FTS5's xQueryPhrase, about half of a session search's statement); a
** count given here is used instead (store.sqlite.doc_freq keeps them, exact in the
** statement's snapshot). Counts of another length, or of another row count than the
** table's, are not used: every phrase is counted, as without them.
**
** With counts that are used, the rows' sizes are kept too, per connection, from one
** statement to the next (a session's searches read the same rows' sizes again): a
** row's size changes only if the row is removed and written again, and every removal
** raises the epoch (a trigger on the table of sizes, store.sqlite.schema), so sizes
** kept under one epoch are exact for any snapshot of that epoch; another epoch drops
** them. Without counts nothing is kept or read from what is kept. Counts are handed
** over for one keyword table of a connection (the store's): its epoch keys the sizes.
**
** bm25() reads every matching row's size in tokens (a lookup in the table's docsize
** table, about 60% of a store-wide search's statement at 20,000 turns). A row's score
** falls as its size grows, and the row holds at least, in each column, as many tokens
** as the offset of the last match there plus one; its score at that size bounds the
** score from above. Once k rows have been scored, a row whose bound is below the k-th
** best score so far is not among the k best, and its size is not read. The k best
** of the statement (ORDER BY ... LIMIT k over this value) are then bm25()'s k best with
** bm25()'s values: every row left out is below k rows already scored.
**
** Loaded into each connection by store.db (``Store._open``); built by setuptools
** (setup.py) against SQLite's extension headers.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1
#include <math.h>
#include <string.h>

#define K1 1.2 /* the constants of fts5_aux.c's bm25() */
#define B 0.75
#define OUTSIDE 1.0 /* a row that cannot be among the k best */
#define MAX_COLUMNS 16 /* more: the bound takes a size of 0 */
#define MAX_K 65536     /* more, or a negative weight: every row is scored (bm25() itself) */
#define MAX_KEPT_ROWID (1 << 24) /* rows above it: their sizes are read, never kept */

/* A connection's kept row sizes: aSize[rowid] is the row's size in tokens plus one
** (0: not kept), all of the one epoch. */
typedef struct Sizes {
  sqlite3_int64 epoch;
  sqlite3_int64 nSize; /* entries of aSize */
  unsigned int *aSize;
} Sizes;

static void sizesFree(void *pArg) {
  Sizes *z = (Sizes *)pArg;
  if (z) sqlite3_free(z->aSize);
  sqlite3_free(z);
}

/* bm25()'s IDF of a phrase that nHit of the table's nRow rows hold (fts5Bm25GetData). */
static double idfOf(sqlite3_int64 nRow, sqlite3_int64 nHit) {
  double idf = log((nRow - nHit + 0.5) / (nHit + 0.5));
  if (idf <= 0.0) idf = 1e-6;
  return idf;
}

/* How many arguments after k are weights: all but a last one that is the counts. */
static int weightCount(int nVal, sqlite3_value **apVal) {
  if (nVal > 1 && sqlite3_value_type(apVal[nVal - 1]) == SQLITE_BLOB) return nVal - 2;
  return nVal - 1;
}

/* A phrase's instances in the current row, from the first not read yet (ic < 0: none). */
typedef struct PhraseAt {
  Fts5PhraseIter it;
  int ic, io;
} PhraseAt;

typedef struct Top {
  int nPhrase;
  sqlite3_int64 nRow;
  double avgdl;
  double *aIDF; /* a phrase's IDF, counted when a row first needs it (below 0: not yet) */
  double *aFreq;
  unsigned char *aUnscored; /* 1: the phrase only selects rows (a count of -2) */
  PhraseAt *aAt;            /* each phrase's iterator in the current row */
  int nWeight;              /* the weights given, by column */
  double *aWeight;
  int k;          /* how many best scores are kept (0: none, every row is scored) */
  int nHeap;      /* how many are kept so far */
  double *aHeap;  /* min-heap of the best scores so far: aHeap[0] is the k-th best */
  sqlite3_int64 iLastRow; /* the last row scored, and its value: a row evaluated twice */
  double lastValue;       /* is scored (and kept) once */
  int bLast;
  Sizes *pSizes; /* the connection's kept sizes, of this statement's epoch (0: none) */
} Top;

/* A column's weight in the score: the one given, 1.0 past those given (bm25()'s). */
static double weightOf(const Top *p, int iCol) {
  return iCol < p->nWeight ? p->aWeight[iCol] : 1.0;
}

static int countRow(const Fts5ExtensionApi *pApi, Fts5Context *pFts, void *pUser) {
  (void)pApi;
  (void)pFts;
  (*(sqlite3_int64 *)pUser)++;
  return SQLITE_OK;
}

/* The statement's data: bm25()'s average size (fts5Bm25GetData), and the heap. */
static int topData(const Fts5ExtensionApi *pApi, Fts5Context *pFts, int k, int nVal,
                   sqlite3_value **apVal, Top **ppTop) {
  int rc = SQLITE_OK;
  Top *p = (Top *)pApi->xGetAuxdata(pFts, 0);
  if (p == 0) {
    sqlite3_int64 nRow = 0, nToken = 0, nByte;
    int i, nPhrase = pApi->xPhraseCount(pFts), nWeight = weightCount(nVal, apVal);
    /* the bound needs scores that fall as a row grows: weights of 0 or more */
    for (i = 1; i <= nWeight; i++) {
      if (sqlite3_value_double(apVal[i]) < 0.0) k = 0;
    }
    if (k > MAX_K) k = 0;
    nByte = sizeof(Top) + (nPhrase * 2 + (sqlite3_int64)k + nWeight) * sizeof(double) +
            nPhrase * (sqlite3_int64)sizeof(PhraseAt) + nPhrase;
    p = (Top *)sqlite3_malloc64(nByte);
    if (p == 0) return SQLITE_NOMEM;
    memset(p, 0, (size_t)nByte);
    p->nPhrase = nPhrase;
    p->aIDF = (double *)&p[1];
    p->aFreq = &p->aIDF[nPhrase];
    p->aHeap = &p->aFreq[nPhrase];
    p->aWeight = &p->aHeap[k];
    p->aAt = (PhraseAt *)&p->aWeight[nWeight];
    p->aUnscored = (unsigned char *)&p->aAt[nPhrase];
    p->k = k;
    p->nWeight = nWeight;
    for (i = 0; i < nWeight; i++) p->aWeight[i] = sqlite3_value_double(apVal[i + 1]);
    rc = pApi->xRowCount(pFts, &nRow);
    if (rc == SQLITE_OK) rc = pApi->xColumnTotalSize(pFts, -1, &nToken);
    if (rc == SQLITE_OK) p->avgdl = (double)nToken / (double)nRow;
    p->nRow = nRow;
    for (i = 0; i < nPhrase; i++) p->aIDF[i] = -1.0;
    if (rc == SQLITE_OK && nWeight < nVal - 1) {
      const unsigned char *aCount = sqlite3_value_blob(apVal[nVal - 1]);
      sqlite3_int64 n = -1, nHit;
      if (aCount != 0 &&
          sqlite3_value_bytes(apVal[nVal - 1]) == (int)sizeof(n) * (nPhrase + 2)) {
        memcpy(&n, aCount, sizeof(n)); /* a blob's bytes need not be aligned */
        for (i = 0; i < nPhrase; i++) {
          memcpy(&nHit, &aCount[sizeof(n) * (i + 2)], sizeof(nHit));
          /* unscored whatever the row count: it changes the sum; an IDF only of it */
          p->aUnscored[i] = (nHit == -2);
          if (n == nRow && nHit >= 0) p->aIDF[i] = idfOf(nRow, nHit);
        }
      }
      if (n == nRow) {
        Sizes *z = (Sizes *)pApi->xUserData(pFts);
        sqlite3_int64 epoch;
        memcpy(&epoch, &aCount[sizeof(n)], sizeof(epoch));
        if (z != 0 && z->epoch != epoch) {
          sqlite3_free(z->aSize);
          z->aSize = 0;
          z->nSize = 0;
          z->epoch = epoch;
        }
        p->pSizes = z;
      }
    }
    if (rc != SQLITE_OK) {
      sqlite3_free(p);
      return rc;
    }
    rc = pApi->xSetAuxdata(pFts, p, sqlite3_free);
    if (rc != SQLITE_OK) return rc;
  }
  *ppTop = p;
  return rc;
}

/* Phrase i's IDF as bm25() counts it (fts5Bm25GetData): the rows that match the phrase
** alone, over the whole table. bm25() counts every phrase before the first row; a
** phrase no row weighs (the session's scope token, in a column of weight 0; a word no
** matching row holds) adds 0 to every score, and is not counted here. */
static int countIdf(const Fts5ExtensionApi *pApi, Fts5Context *pFts, Top *p, int i) {
  sqlite3_int64 nHit = 0;
  int rc = pApi->xQueryPhrase(pFts, i, (void *)&nHit, countRow);
  if (rc != SQLITE_OK) return rc;
  p->aIDF[i] = idfOf(p->nRow, nHit);
  return SQLITE_OK;
}

/* bm25()'s sum over the phrases for a row of D tokens (the same operations in the same
** order, so the same double; a phrase of frequency 0 adds +0.0 there, left out here). */
static double score(const Top *p, double D) {
  double s = 0.0;
  int i;
  for (i = 0; i < p->nPhrase; i++) {
    if (p->aFreq[i] == 0.0) continue;
    s += p->aIDF[i] * ((p->aFreq[i] * (K1 + 1.0)) /
                       (p->aFreq[i] + K1 * (1 - B + B * D / p->avgdl)));
  }
  return s;
}

static void keep(Top *p, double s) {
  int i = 0;
  if (p->nHeap < p->k) { /* sift up */
    i = p->nHeap++;
    while (i > 0 && p->aHeap[(i - 1) / 2] > s) {
      p->aHeap[i] = p->aHeap[(i - 1) / 2];
      i = (i - 1) / 2;
    }
    p->aHeap[i] = s;
    return;
  }
  if (s <= p->aHeap[0]) return;
  for (;;) { /* replace the root, sift down */
    int c = 2 * i + 1;
    if (c >= p->k) break;
    if (c + 1 < p->k && p->aHeap[c + 1] < p->aHeap[c]) c++;
    if (p->aHeap[c] >= s) break;
    p->aHeap[i] = p->aHeap[c];
    i = c;
  }
  p->aHeap[i] = s;
}

/* The row's size in tokens (FTS5's xColumnSize of every column), from the kept sizes
** when they hold it; read and kept otherwise. Keeping it is skipped, never an error,
** when memory is short. */
static int rowSize(const Fts5ExtensionApi *pApi, Fts5Context *pFts, Sizes *z,
                   sqlite3_int64 iRow, int *pnTok) {
  int rc;
  if (z != 0 && iRow > 0 && iRow < z->nSize && z->aSize[iRow] != 0) {
    *pnTok = (int)(z->aSize[iRow] - 1);
    return SQLITE_OK;
  }
  rc = pApi->xColumnSize(pFts, -1, pnTok);
  if (rc != SQLITE_OK || z == 0 || iRow <= 0 || iRow >= MAX_KEPT_ROWID || *pnTok < 0) {
    return rc;
  }
  if (iRow >= z->nSize) {
    sqlite3_int64 n = z->nSize ? z->nSize : 1024;
    unsigned int *a;
    while (n <= iRow) n *= 2; /* at most MAX_KEPT_ROWID: iRow is below it */
    a = (unsigned int *)sqlite3_realloc64(z->aSize, (sqlite3_uint64)n * sizeof(*a));
    if (a == 0) return SQLITE_OK;
    memset(&a[z->nSize], 0, (size_t)(n - z->nSize) * sizeof(*a));
    z->aSize = a;
    z->nSize = n;
  }
  z->aSize[iRow] = (unsigned int)*pnTok + 1;
  return SQLITE_OK;
}

static void bm25Top(const Fts5ExtensionApi *pApi, Fts5Context *pFts, sqlite3_context *pCtx,
                    int nVal, sqlite3_value **apVal) {
  Top *p = 0;
  int rc, i, k, nCol;
  sqlite3_int64 iRow, least = 0;
  int aLast[MAX_COLUMNS]; /* per column, the offset of its last match (-1: none) */
  double value, ceiling = 0.0;
  if (nVal < 1 || (k = sqlite3_value_int(apVal[0])) < 1) {
    sqlite3_result_error(pCtx, "bm25_top: k must be a positive integer", -1);
    return;
  }
  rc = topData(pApi, pFts, k, nVal, apVal, &p);
  if (rc != SQLITE_OK) {
    sqlite3_result_error_code(pCtx, rc);
    return;
  }
  iRow = pApi->xRowid(pFts);
  if (p->bLast && p->iLastRow == iRow) {
    sqlite3_result_double(pCtx, p->lastValue);
    return;
  }
  /* Which phrases the row holds, and the most they can add: a phrase adds less than its
  ** IDF times (k1 + 1), however often the row holds it. Once k rows are scored, a row
  ** whose phrases' ceilings add up to less than the k-th best is not among the best k,
  ** and its instances are not read. A phrase whose IDF is not counted yet has no
  ** ceiling unless it weighs nothing here (the session's scope token, in a column of
  ** weight 0). */
  for (i = 0; rc == SQLITE_OK && i < p->nPhrase; i++) {
    PhraseAt *a = &p->aAt[i];
    a->ic = -1;
    if (p->aUnscored[i]) continue; /* its frequency stays 0: it adds nothing */
    rc = pApi->xPhraseFirst(pFts, i, &a->it, &a->ic, &a->io);
    if (rc != SQLITE_OK || a->ic < 0) continue;
    if (p->aIDF[i] >= 0.0) {
      ceiling += p->aIDF[i] * (K1 + 1.0);
    } else {
      Fts5PhraseIter it = a->it;
      int ic = a->ic, io = a->io;
      while (ic >= 0 && weightOf(p, ic) == 0.0) pApi->xPhraseNext(pFts, &it, &ic, &io);
      if (ic >= 0) ceiling = HUGE_VAL;
    }
  }
  if (rc == SQLITE_OK && p->k > 0 && p->nHeap == p->k && ceiling < p->aHeap[0]) {
    value = OUTSIDE;
    goto done;
  }
  memset(p->aFreq, 0, sizeof(double) * p->nPhrase);
  nCol = pApi->xColumnCount(pFts);
  for (i = 0; i < MAX_COLUMNS; i++) aLast[i] = -1;
  /* each phrase's instances from its own position list: bm25()'s xInst gives the same
  ** ones, each phrase's in the same order (so the same sums), after FTS5 has merged
  ** every phrase's instances into one array (4-7% of a search's statement, 20,000
  ** turns) */
  for (i = 0; rc == SQLITE_OK && i < p->nPhrase; i++) {
    PhraseAt *a = &p->aAt[i];
    while (a->ic >= 0) {
      p->aFreq[i] += weightOf(p, a->ic);
      if (a->ic < MAX_COLUMNS && a->io > aLast[a->ic]) aLast[a->ic] = a->io;
      pApi->xPhraseNext(pFts, &a->it, &a->ic, &a->io);
    }
  }
  for (i = 0; rc == SQLITE_OK && i < p->nPhrase; i++) {
    if (p->aFreq[i] != 0.0 && p->aIDF[i] < 0.0) rc = countIdf(pApi, pFts, p, i);
  }
  if (nCol <= MAX_COLUMNS) {
    for (i = 0; i < MAX_COLUMNS; i++) least += aLast[i] + 1;
  }
  if (rc != SQLITE_OK) {
    sqlite3_result_error_code(pCtx, rc);
    return;
  }
  if (p->k > 0 && p->nHeap == p->k && score(p, (double)least) < p->aHeap[0]) {
    value = OUTSIDE;
  } else {
    int nTok;
    double s;
    rc = rowSize(pApi, pFts, p->pSizes, iRow, &nTok);
    if (rc != SQLITE_OK) {
      sqlite3_result_error_code(pCtx, rc);
      return;
    }
    s = score(p, (double)nTok);
    if (p->k > 0) keep(p, s);
    value = -1.0 * s;
  }
done:
  p->bLast = 1;
  p->iLastRow = iRow;
  p->lastValue = value;
  sqlite3_result_double(pCtx, value);
}

#ifdef _WIN32
__declspec(dllexport)
#endif
int sqlite3_bm25top_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi) {
  fts5_api *fts5 = 0;
  sqlite3_stmt *pStmt = 0;
  Sizes *z;
  int rc;
  SQLITE_EXTENSION_INIT2(pApi);
  rc = sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &pStmt, 0);
  if (rc == SQLITE_OK) {
    sqlite3_bind_pointer(pStmt, 1, (void *)&fts5, "fts5_api_ptr", 0);
    sqlite3_step(pStmt);
    rc = sqlite3_finalize(pStmt);
  }
  if (rc == SQLITE_OK && fts5 == 0) rc = SQLITE_ERROR;
  if (rc != SQLITE_OK) {
    *pzErrMsg = sqlite3_mprintf("bm25_top: FTS5 is not available");
    return rc;
  }
  z = (Sizes *)sqlite3_malloc(sizeof(Sizes));
  if (z == 0) return SQLITE_NOMEM;
  memset(z, 0, sizeof(Sizes));
  rc = fts5->xCreateFunction(fts5, "bm25_top", (void *)z, bm25Top, sizesFree);
  if (rc != SQLITE_OK) sqlite3_free(z); /* not registered: FTS5 never calls sizesFree */
  return rc;
}
