/* courtly.core._speedups: compiled helpers for courtly.core, bit-identical
 * to the pure-Python code they stand in for (the tests compare them).
 *
 * simhash(data, shingle) -> int computes exactly what the pure-Python
 * `fingerprint.simhash64_py` computes (see the module docstring of
 * fingerprint.py: fingerprints are stored in crawl databases, so the two
 * must agree bit for bit). `data` is either
 *   - a str, lowercased already (str.lower() is a full, context-dependent
 *     case mapping; Python does it): its words are the runs of characters
 *     re's \w matches in a str pattern (Py_UNICODE_ISALNUM, or '_'), as
 *     UTF-8; or
 *   - a bytes-like object: a byte in [A-Za-z0-9_] belongs to a word (A-Z
 *     read as a-z), any other byte below 0x80 separates words, a byte >= 0x80
 *     belongs to a word. ASCII text as it is, or the UTF-8 of \w+ tokens
 *     joined by spaces, give the words Python's tokeniser gives.
 * A shingle is `shingle` consecutive words joined by one space (all words
 * when there are no more than `shingle`); each shingle votes with the 64 bits
 * of its XXH64 (seed 0); bit b of the result is 1 when more than half of the
 * votes have bit b set (the same as Python's, by
 * test_speedups.py::test_native_and_python_agree_on_any_text). No words: 0.
 * With `drop` (a tuple of at most DROP_MAX bytes), words equal to one of
 * them are left out first (the soft-404 fingerprint leaves out the words of
 * the requested URL). With `lower` true, a str is read as str.lower() would
 * give it (compact_lower: no lowercased copy of the text is made; ASCII is
 * lowercased as it is split anyway).
 *
 * words(data, lower=False) -> bytes: the words simhash() reads, one space
 * apart (tests).
 * collapse(text) -> str: " ".join(text.split()), exactly (maintext).
 * attr_values, count_over, link_anchors: see _speedups_html.c.
 * xxh64(data) -> int: XXH64, seed 0 (tests).
 *
 * Pure: no I/O, no global state after import; the GIL is released while
 * words are split and hashed.
 */

#include "_speedups.h"

#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define SHINGLE_MAX 16
#define DROP_MAX 64 /* words simhash() may be asked to leave out */

/* XXH64 (seed 0) is the upstream xxHash header's (Debian: libxxhash-dev),
 * inlined: setup.py checks for it and skips this extension without it. */
#define XXH_INLINE_ALL
#include <xxhash.h>

/* ---------------------------------------------------------------- SimHash */

/* WORD[c]: 1 when byte c is part of a word; OUT[c]: what the compacted
 * text holds for it (A-Z lowercased, a separator becomes a space). */
static unsigned char WORD[256];
static unsigned char OUT[256];
static unsigned char SPACE[256]; /* Py_UNICODE_ISSPACE of the Latin-1 characters */

static void init_tables(void)
{
    for (int c = 0; c < 256; c++) {
        int word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'
                   || c >= 0x80;
        WORD[c] = (unsigned char)word;
        OUT[c] = (unsigned char)(!word ? ' ' : (c >= 'A' && c <= 'Z') ? c + 32 : c);
    }
    for (int c = 0; c < 256; c++)
        SPACE[c] = (unsigned char)(Py_UNICODE_ISSPACE(c) ? 1 : 0);
}

/* Per-bit vote counts: eight accumulators hold, in byte lane j of acc[k],
 * the count of bit 8j+k; they are flushed to `counts` before a lane can
 * overflow (255 additions). */
typedef struct {
    uint64_t acc[8];
    uint64_t counts[64];
    unsigned pending;
} Votes;

static void votes_flush(Votes *v)
{
    for (int k = 0; k < 8; k++) {
        uint64_t a = v->acc[k];
        for (int j = 0; j < 8; j++)
            v->counts[8 * j + k] += (a >> (8 * j)) & 0xFF;
        v->acc[k] = 0;
    }
    v->pending = 0;
}

/* The votes of each of hashes[0:count], count <= HASH_BATCH. Hashing a
 * batch first and voting after keeps each loop small: the accumulators stay
 * in registers (the vote vectorises) and the hashes of successive shingles
 * overlap in the CPU. */
#define HASH_BATCH 128

static void votes_add_all(Votes *v, const uint64_t *hashes, size_t count)
{
    const uint64_t ones = 0x0101010101010101ULL;
    if (v->pending + count >= 255)
        votes_flush(v);
    uint64_t acc[8];
    memcpy(acc, v->acc, sizeof acc);
    for (size_t i = 0; i < count; i++)
        for (int k = 0; k < 8; k++)
            acc[k] += (hashes[i] >> k) & ones;
    memcpy(v->acc, acc, sizeof acc);
    v->pending += (unsigned)count;
}

/* Copy the words of data[0:len] into buf (lowercased, one space between
 * words); starts[i] is where word i begins in buf. Returns the word count;
 * *buf_len receives the length of the compacted text. Branch-free: words
 * are short, so branching on every word boundary mispredicts a lot. A byte
 * is written always and kept (out advances) when it is a word byte or the
 * first separator after a word; starts[n] is written always and kept when a
 * word begins. With SSE2 (every x86-64), blocks of 16 bytes that drop no
 * byte and start at most 4 words go whole (the same words as the byte loop:
 * test_speedups_worker.py::test_native_words_of_ascii_in_16_byte_blocks_are_the_regex_words).
 * buf needs len + 16 bytes, starts len / 2 + 6 entries. */
static inline void compact_byte(unsigned char c, unsigned char *buf, uint32_t *starts, size_t *n, size_t *out,
                                unsigned *prev)
{
    unsigned w = WORD[c];
    buf[*out] = OUT[c];
    starts[*n] = (uint32_t)*out;
    *n += w & (*prev ^ 1u);
    *out += w | *prev;
    *prev = w;
}

static size_t compact_words(const unsigned char *data, size_t len, unsigned char *buf, uint32_t *starts,
                            size_t *buf_len)
{
    size_t n = 0, out = 0, i = 0;
    unsigned prev = 0;
#if defined(__SSE2__)
    /* 16 bytes at a time where no byte is dropped (every separator is the
     * first after a word) and at most 4 words begin: the block is written
     * whole and its word starts with four branch-free steps. Other blocks
     * take the byte loop below. */
    const __m128i before_a = _mm_set1_epi8('a' - 1), after_z = _mm_set1_epi8('z' + 1);
    const __m128i before_A = _mm_set1_epi8('A' - 1), after_Z = _mm_set1_epi8('Z' + 1);
    const __m128i before_0 = _mm_set1_epi8('0' - 1), after_9 = _mm_set1_epi8('9' + 1);
    const __m128i underscore = _mm_set1_epi8('_'), case_bit = _mm_set1_epi8(0x20), space = _mm_set1_epi8(' ');
    const __m128i zero = _mm_setzero_si128();
    for (; i + 16 <= len; i += 16) {
        __m128i c = _mm_loadu_si128((const __m128i *)(data + i));
        __m128i folded = _mm_or_si128(c, case_bit);
        __m128i alpha = _mm_and_si128(_mm_cmpgt_epi8(folded, before_a), _mm_cmpgt_epi8(after_z, folded));
        __m128i upper = _mm_and_si128(_mm_cmpgt_epi8(c, before_A), _mm_cmpgt_epi8(after_Z, c));
        __m128i digit = _mm_and_si128(_mm_cmpgt_epi8(c, before_0), _mm_cmpgt_epi8(after_9, c));
        __m128i word = _mm_or_si128(_mm_or_si128(alpha, digit),
                                    _mm_or_si128(_mm_cmpeq_epi8(c, underscore), _mm_cmplt_epi8(c, zero)));
        unsigned m = (unsigned)_mm_movemask_epi8(word);
        unsigned p = ((m << 1) | prev) & 0xFFFF; /* bit j: byte j - 1 is a word byte */
        unsigned s = m & ~p;                    /* word starts */
        if ((m | p) != 0xFFFF || __builtin_popcount(s) > 4) {
            for (size_t k = i; k < i + 16; k++) /* the byte loop, for this block */
                compact_byte(data[k], buf, starts, &n, &out, &prev);
            continue;
        }
        __m128i lowered = _mm_add_epi8(c, _mm_and_si128(upper, case_bit));
        __m128i o = _mm_or_si128(_mm_and_si128(word, lowered), _mm_andnot_si128(word, space));
        _mm_storeu_si128((__m128i *)(buf + out), o);
        unsigned t = s | 0xF0000; /* four sentinel bits: ctz never sees 0 (undefined) */
        starts[n] = (uint32_t)(out + (unsigned)__builtin_ctz(t));
        t &= t - 1;
        starts[n + 1] = (uint32_t)(out + (unsigned)__builtin_ctz(t));
        t &= t - 1;
        starts[n + 2] = (uint32_t)(out + (unsigned)__builtin_ctz(t));
        t &= t - 1;
        starts[n + 3] = (uint32_t)(out + (unsigned)__builtin_ctz(t));
        n += (size_t)__builtin_popcount(s);
        out += 16;
        prev = m >> 15;
    }
#endif
    for (; i < len; i++)
        compact_byte(data[i], buf, starts, &n, &out, &prev);
    *buf_len = out - (out > 0 && !prev); /* drop a trailing space */
    return n;
}

/* The SimHash of the n words of buf[0:buf_len], starting at starts[]. */
static uint64_t simhash_words(unsigned char *buf, size_t buf_len, const uint32_t *starts, size_t n,
                              size_t shingle)
{
    if (n == 0)
        return 0;
    size_t grams = n <= shingle ? 1 : n - shingle + 1;
    Votes v;
    uint64_t hashes[HASH_BATCH];
    memset(&v, 0, sizeof v);
    for (size_t i = 0; i < grams; i += HASH_BATCH) {
        size_t batch = grams - i < HASH_BATCH ? grams - i : HASH_BATCH;
        for (size_t b = 0; b < batch; b++) {
            size_t last = i + b + shingle; /* first word after the shingle */
            size_t stop = last >= n ? buf_len : (size_t)starts[last] - 1;
            size_t len = stop - starts[i + b];
            hashes[b] = XXH64(buf + starts[i + b], len, 0);
        }
        votes_add_all(&v, hashes, batch);
    }
    votes_flush(&v);
    uint64_t fp = 0;
    for (int b = 0; b < 64; b++)
        if (2 * v.counts[b] > (uint64_t)grams)
            fp |= (uint64_t)1 << b;
    return fp;
}

/* The words of a str that is lowercased already (str.lower() is a full,
 * context-dependent case mapping: Python does it): runs of the characters
 * Python's re matches with \w in a str pattern (Py_UNICODE_ISALNUM, or
 * '_'), each written as UTF-8, one space between words. Non-word characters
 * (surrogates among them) separate words. buf needs 4 bytes per character
 * (fewer for narrower kinds), starts len / 2 + 2 entries. */
static size_t compact_unicode(int kind, const void *data, size_t len, unsigned char *buf, uint32_t *starts,
                              size_t *buf_len)
{
    size_t n = 0, out = 0;
    int prev = 0;
    for (size_t i = 0; i < len; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        int w = ch < 0x80 ? WORD[ch] : (int)Py_UNICODE_ISALNUM(ch);
        if (w) {
            if (!prev) {
                if (n)
                    buf[out++] = ' ';
                starts[n++] = (uint32_t)out;
            }
            if (ch < 0x80) {
                buf[out++] = (unsigned char)ch;
            } else if (ch < 0x800) {
                buf[out++] = (unsigned char)(0xC0 | (ch >> 6));
                buf[out++] = (unsigned char)(0x80 | (ch & 0x3F));
            } else if (ch < 0x10000) {
                buf[out++] = (unsigned char)(0xE0 | (ch >> 12));
                buf[out++] = (unsigned char)(0x80 | ((ch >> 6) & 0x3F));
                buf[out++] = (unsigned char)(0x80 | (ch & 0x3F));
            } else {
                buf[out++] = (unsigned char)(0xF0 | (ch >> 18));
                buf[out++] = (unsigned char)(0x80 | ((ch >> 12) & 0x3F));
                buf[out++] = (unsigned char)(0x80 | ((ch >> 6) & 0x3F));
                buf[out++] = (unsigned char)(0x80 | (ch & 0x3F));
            }
        }
        prev = w;
    }
    *buf_len = out;
    return n;
}

/* The words of text.lower(), text a str that is not ASCII, in one pass:
 * str.lower() maps each character to its full lowercase, which is its
 * simple lowercase (Py_UNICODE_TOLOWER) for every character but U+0130
 * (two characters) and U+03A3 (final sigma: depends on the neighbours);
 * the caller leaves texts holding either to str.lower(). A word is a run of
 * lowered characters that re's \w matches, as compact_unicode; ASCII takes
 * compact_byte's branch-free step: a fraction of str.lower()'s cost
 * (docs/performance.md). Never longer than compact_unicode's output: a
 * character's lowercase needs no more UTF-8 bytes than its kind allows (the
 * tests check every one). */
static inline void compact_wide(Py_UCS4 lo, unsigned char *buf, uint32_t *starts, size_t *n, size_t *out,
                                unsigned *prev)
{
    unsigned w = Py_UNICODE_ISALNUM(lo) ? 1u : 0u;
    size_t o = *out;
    if (!w) {
        buf[o] = ' ';
        *out = o + *prev;
        *prev = 0;
        return;
    }
    starts[*n] = (uint32_t)o;
    *n += *prev ^ 1u;
    if (lo < 0x800) {
        buf[o++] = (unsigned char)(0xC0 | (lo >> 6));
    } else if (lo < 0x10000) {
        buf[o++] = (unsigned char)(0xE0 | (lo >> 12));
        buf[o++] = (unsigned char)(0x80 | ((lo >> 6) & 0x3F));
    } else {
        buf[o++] = (unsigned char)(0xF0 | (lo >> 18));
        buf[o++] = (unsigned char)(0x80 | ((lo >> 12) & 0x3F));
        buf[o++] = (unsigned char)(0x80 | ((lo >> 6) & 0x3F));
    }
    buf[o++] = (unsigned char)(0x80 | (lo & 0x3F));
    *out = o;
    *prev = 1;
}

#define COMPACT_LOWER_LOOP(T)                                                             \
    {                                                                                     \
        const T *in = (const T *)data;                                                    \
        for (size_t i = 0; i < len; i++) {                                                \
            Py_UCS4 ch = in[i];                                                           \
            if (ch < 0x80) {                                                              \
                compact_byte((unsigned char)ch, buf, starts, &n, &out, &prev);            \
            } else {                                                                      \
                Py_UCS4 lo = Py_UNICODE_TOLOWER(ch);                                      \
                if (lo < 0x80)                                                            \
                    compact_byte((unsigned char)lo, buf, starts, &n, &out, &prev);        \
                else                                                                      \
                    compact_wide(lo, buf, starts, &n, &out, &prev);                       \
            }                                                                             \
        }                                                                                 \
    }

static size_t compact_lower(int kind, const void *data, size_t len, unsigned char *buf, uint32_t *starts,
                            size_t *buf_len)
{
    size_t n = 0, out = 0;
    unsigned prev = 0;
    if (kind == PyUnicode_1BYTE_KIND)
        COMPACT_LOWER_LOOP(Py_UCS1)
    else if (kind == PyUnicode_2BYTE_KIND)
        COMPACT_LOWER_LOOP(Py_UCS2)
    else
        COMPACT_LOWER_LOOP(Py_UCS4)
    *buf_len = out - (out > 0 && !prev); /* drop a trailing space */
    return n;
}

/* str.lower() of a character is one character other than the simple
 * mapping only for U+0130 and U+03A3 (see compact_lower). */
static int needs_full_lower(int kind, const void *data, size_t len)
{
    if (kind == PyUnicode_1BYTE_KIND)
        return 0;
    for (size_t i = 0; i < len; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        if (ch == 0x130 || ch == 0x3A3)
            return 1;
    }
    return 0;
}

/* The words of `obj` (a str, lowercased already, or a bytes-like object read
 * as the module comment says), compacted into a new buffer. */
typedef struct {
    unsigned char *buf;
    uint32_t *starts;
    size_t len;   /* bytes used in buf */
    size_t n;     /* words */
} Words;

static void words_free(Words *w)
{
    PyMem_RawFree(w->buf);
    PyMem_RawFree(w->starts);
}

static int words_of(PyObject *obj, Words *w, int lower)
{
    Py_buffer view = {0};
    const void *data;
    size_t len, size;
    int kind = 0;
    memset(w, 0, sizeof *w);
    if (PyUnicode_Check(obj)) {
        if (PyUnicode_READY(obj) < 0)
            return -1;
        len = (size_t)PyUnicode_GET_LENGTH(obj);
        data = PyUnicode_DATA(obj);
        kind = PyUnicode_IS_ASCII(obj) ? 0 : PyUnicode_KIND(obj);
        if (lower && kind != 0 && needs_full_lower(kind, data, len)) {
            PyObject *low = PyObject_CallMethod(obj, "lower", NULL);
            if (low == NULL)
                return -1;
            int rc = words_of(low, w, 0);
            Py_DECREF(low);
            return rc;
        }
        size = kind == 0 ? len : kind == PyUnicode_1BYTE_KIND ? 2 * len : kind == PyUnicode_2BYTE_KIND ? 3 * len
                                                                                                    : 4 * len;
    } else {
        if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0)
            return -1;
        data = view.buf;
        len = size = (size_t)view.len;
    }
    if (size >= UINT32_MAX) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "text too large for simhash (4 GiB of UTF-8 at most)");
        return -1;
    }
    w->buf = PyMem_RawMalloc(size + 16); /* + 16: compact_words' 16-byte stores */
    w->starts = PyMem_RawMalloc(sizeof(uint32_t) * (len / 2 + 2 + 4)); /* + 4: compact_words writes ahead */
    if (w->buf == NULL || w->starts == NULL) {
        words_free(w);
        PyBuffer_Release(&view);
        PyErr_NoMemory();
        return -1;
    }
    Py_BEGIN_ALLOW_THREADS
    if (kind == 0)
        w->n = compact_words((const unsigned char *)data, len, w->buf, w->starts, &w->len);
    else if (lower)
        w->n = compact_lower(kind, data, len, w->buf, w->starts, &w->len);
    else
        w->n = compact_unicode(kind, data, len, w->buf, w->starts, &w->len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return 0;
}

/* Remove from `w` the words equal to one of the `ndrop` words in `drop`
 * (compacting the buffer in place; a word's end is the next word's start
 * minus the space, read before that start can be overwritten). */
static void words_drop(Words *w, const char *const *drop, const Py_ssize_t *drop_len, Py_ssize_t ndrop)
{
    size_t out = 0, m = 0;
    for (size_t i = 0; i < w->n; i++) {
        size_t start = w->starts[i];
        size_t end = i + 1 < w->n ? (size_t)w->starts[i + 1] - 1 : w->len;
        size_t len = end - start;
        int dropped = 0;
        for (Py_ssize_t k = 0; k < ndrop && !dropped; k++)
            dropped = (size_t)drop_len[k] == len && memcmp(drop[k], w->buf + start, len) == 0;
        if (dropped)
            continue;
        if (m)
            w->buf[out++] = ' ';
        memmove(w->buf + out, w->buf + start, len);
        w->starts[m++] = (uint32_t)out;
        out += len;
    }
    w->n = m;
    w->len = out;
}

static PyObject *speedups_simhash(PyObject *self, PyObject *args)
{
    PyObject *obj, *drop = NULL;
    int shingle;
    Words w;
    const char *drop_words[DROP_MAX];
    Py_ssize_t drop_len[DROP_MAX], ndrop = 0;
    int lower = 0;
    if (!PyArg_ParseTuple(args, "Oi|O!p:simhash", &obj, &shingle, &PyTuple_Type, &drop, &lower))
        return NULL;
    if (shingle < 1 || shingle > SHINGLE_MAX) {
        PyErr_Format(PyExc_ValueError, "shingle must be in 1..%d", SHINGLE_MAX);
        return NULL;
    }
    if (drop != NULL) {
        ndrop = PyTuple_GET_SIZE(drop);
        if (ndrop > DROP_MAX) {
            PyErr_Format(PyExc_ValueError, "at most %d words to drop", DROP_MAX);
            return NULL;
        }
        for (Py_ssize_t k = 0; k < ndrop; k++) {
            PyObject *item = PyTuple_GET_ITEM(drop, k);
            if (!PyBytes_Check(item)) {
                PyErr_SetString(PyExc_TypeError, "words to drop must be bytes");
                return NULL;
            }
            drop_words[k] = PyBytes_AS_STRING(item);
            drop_len[k] = PyBytes_GET_SIZE(item);
        }
    }
    if (words_of(obj, &w, lower) < 0)
        return NULL;
    uint64_t fp;
    Py_BEGIN_ALLOW_THREADS
    if (ndrop)
        words_drop(&w, drop_words, drop_len, ndrop);
    fp = simhash_words(w.buf, w.len, w.starts, w.n, (size_t)shingle);
    Py_END_ALLOW_THREADS
    words_free(&w);
    return PyLong_FromUnsignedLongLong(fp);
}

static PyObject *speedups_words(PyObject *self, PyObject *args)
{
    PyObject *obj;
    int lower = 0;
    Words w;
    if (!PyArg_ParseTuple(args, "O|p:words", &obj, &lower) || words_of(obj, &w, lower) < 0)
        return NULL;
    PyObject *out = PyBytes_FromStringAndSize((const char *)w.buf, (Py_ssize_t)w.len);
    words_free(&w);
    return out;
}

/* " ".join(text.split()), exactly: runs of Py_UNICODE_ISSPACE characters
 * become one space, none at either end. Branch-free on ASCII like
 * compact_words: a character is written always and kept when it is no
 * space or the first space after a word. The result is built in the input's
 * kind and handed to PyUnicode_FromKindAndData, which narrows it when the
 * characters removed were the only wide ones (a str must be canonical). */
#define COLLAPSE_LOOP(T)                                                          \
    {                                                                             \
        const T *in = (const T *)data;                                            \
        T *o = (T *)buf;                                                          \
        for (Py_ssize_t i = 0; i < len; i++) {                                    \
            Py_UCS4 ch = in[i];                                                   \
            unsigned sp = ch < 0x100 ? SPACE[ch] : (unsigned)Py_UNICODE_ISSPACE(ch); \
            Py_UCS4 keep = (Py_UCS4)sp - 1u; /* all ones when ch is no space */   \
            o[out] = (T)((ch & keep) | (' ' & ~keep));                            \
            out += (sp ^ 1u) | (prev ^ 1u);                                        \
            prev = sp;                                                            \
        }                                                                         \
    }

static PyObject *speedups_collapse(PyObject *self, PyObject *obj)
{
    if (!PyUnicode_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "collapse() needs a str");
        return NULL;
    }
    if (PyUnicode_READY(obj) < 0)
        return NULL;
    Py_ssize_t len = PyUnicode_GET_LENGTH(obj);
    int kind = PyUnicode_KIND(obj);
    const void *data = PyUnicode_DATA(obj);
    void *buf = PyMem_Malloc((size_t)(len ? len : 1) * (size_t)kind);
    if (buf == NULL)
        return PyErr_NoMemory();
    Py_ssize_t out = 0;
    unsigned prev = 1; /* as if after a space: no space at the start */
    if (kind == PyUnicode_1BYTE_KIND)
        COLLAPSE_LOOP(Py_UCS1)
    else if (kind == PyUnicode_2BYTE_KIND)
        COLLAPSE_LOOP(Py_UCS2)
    else
        COLLAPSE_LOOP(Py_UCS4)
    out -= out > 0 && prev; /* no space at the end */
    PyObject *result = PyUnicode_FromKindAndData(kind, buf, out);
    PyMem_Free(buf);
    return result;
}

static PyObject *speedups_xxh64(PyObject *self, PyObject *args)
{
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*:xxh64", &view))
        return NULL;
    uint64_t h = XXH64(view.buf, (size_t)view.len, 0);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLongLong(h);
}

static PyMethodDef speedups_methods[] = {
    {"simhash", speedups_simhash, METH_VARARGS,
     "simhash(data, shingle, drop=(), lower=False) -> int: 64-bit SimHash of the words of data (see the\n"
     "module source), leaving out the words equal to one in drop (a tuple of at most 64 UTF-8 bytes);\n"
     "with lower, those of data.lower() (data a str)."},
    {"words", speedups_words, METH_VARARGS,
     "words(data, lower=False) -> bytes: the words simhash() hashes, one space apart."},
    {"collapse", speedups_collapse, METH_O, "collapse(text) -> str: ' '.join(text.split()), exactly."},
    {"attr_values", speedups_attr_values, METH_VARARGS,
     "attr_values(text, name) -> list[str]: the values maintext's class/id regex scan keeps (see the source)."},
    {"count_over", speedups_count_over, METH_VARARGS,
     "count_over(text, ch, limit) -> bool: text.count(ch) > limit, exactly."},
    {"link_anchors", speedups_link_anchors, METH_VARARGS,
     "link_anchors(nodes, start, links, index, links_max, base, fallback) -> int: links._Scan.anchor for the\n"
     "run of a/area nodes at nodes[start:] (see the source); the index of the first other node."},
    {"xxh64", speedups_xxh64, METH_VARARGS, "xxh64(data) -> int: XXH64 of data with seed 0."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT, "courtly.core._speedups",
    "Compiled SimHash for courtly.core.fingerprint (bit-identical to the pure-Python path).", -1,
    speedups_methods,
};

PyMODINIT_FUNC PyInit__speedups(void)
{
    init_tables();
    if (speedups_html_init() < 0)
        return NULL;
    return PyModule_Create(&speedups_module);
}
