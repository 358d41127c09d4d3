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
 * votes have bit b set. No words: 0. With `drop` (a tuple of at most
 * DROP_MAX bytes), words equal to one of them are left out first (the
 * soft-404 fingerprint leaves out the words of the requested URL). With
 * `lower` true, a str is read as str.lower() would give it (compact_lower:
 * no lowercased copy of the text is made; ASCII is lowercased as it is split
 * anyway).
 *
 * words(data, lower=False) -> bytes: the words simhash() reads, one space
 * apart (tests).
 * collapse(text) -> str: " ".join(text.split()), exactly (maintext).
 * link_anchors(...): the anchors of a page's link scan (links._Scan).
 * count_over(text, ch, limit) -> bool: text.count(ch) > limit (links).
 * attr_values(text, name) -> list[str]: maintext's raw scan of class/id
 *   attribute values, exactly as its regex (maintext._attr_values_py).
 * xxh64(data) -> int: XXH64, seed 0 (tests).
 *
 * Pure: no I/O, no global state after import; the GIL is released while
 * words are split and hashed.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define SHINGLE_MAX 16
#define DROP_MAX 64 /* words simhash() may be asked to leave out */

/* ---------------------------------------------------------------- XXH64
 * The 64-bit xxHash of Yann Collet (https://github.com/Cyan4973/xxHash,
 * doc/xxhash_spec.md), seed 0 only; inputs are read little-endian. */

static const uint64_t P1 = 0x9E3779B185EBCA87ULL;
static const uint64_t P2 = 0xC2B2AE3D27D4EB4FULL;
static const uint64_t P3 = 0x165667B19E3779F9ULL;
static const uint64_t P4 = 0x85EBCA77C2B2AE63ULL;
static const uint64_t P5 = 0x27D4EB2F165667C5ULL;

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t read64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint32_t read32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

static inline uint64_t xxh_round(uint64_t acc, uint64_t input)
{
    acc += input * P2;
    acc = rotl64(acc, 31);
    return acc * P1;
}

static inline uint64_t xxh_merge(uint64_t acc, uint64_t val)
{
    acc ^= xxh_round(0, val);
    return acc * P1 + P4;
}

static inline uint64_t xxh_avalanche(uint64_t h)
{
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

static uint64_t xxh64(const unsigned char *p, size_t len)
{
    const unsigned char *end = p + len;
    uint64_t h;
    if (len >= 32) {
        const unsigned char *limit = end - 32;
        uint64_t v1 = P1 + P2, v2 = P2, v3 = 0, v4 = 0 - P1;
        do {
            v1 = xxh_round(v1, read64(p));
            v2 = xxh_round(v2, read64(p + 8));
            v3 = xxh_round(v3, read64(p + 16));
            v4 = xxh_round(v4, read64(p + 24));
            p += 32;
        } while (p <= limit);
        h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
        h = xxh_merge(h, v1);
        h = xxh_merge(h, v2);
        h = xxh_merge(h, v3);
        h = xxh_merge(h, v4);
    } else {
        h = P5;
    }
    h += (uint64_t)len;
    while (p + 8 <= end) {
        h ^= xxh_round(0, read64(p));
        h = rotl64(h, 27) * P1 + P4;
        p += 8;
    }
    if (p + 4 <= end) {
        h ^= (uint64_t)read32(p) * P1;
        h = rotl64(h, 23) * P2 + P3;
        p += 4;
    }
    while (p < end) {
        h ^= (uint64_t)(*p) * P5;
        h = rotl64(h, 11) * P1;
        p++;
    }
    return xxh_avalanche(h);
}

/* XXH64 of len < 32 bytes at p, where 32 bytes are readable (the words
 * buffer has XXH_PAD zero bytes after its text): the steps of xxh64(), each
 * computed always and kept or not by a mask instead of a branch on the
 * length. A shingle's length varies from one to the next, so those branches
 * mispredicted; without them the hashes of a batch overlap in the CPU
 * (~78 -> ~71 us for the SimHash of a 30 KB text). */
#define XXH_PAD 32

static inline uint64_t keep_if(uint64_t cond, uint64_t yes, uint64_t no)
{
    return no ^ ((yes ^ no) & (0 - (uint64_t)(cond != 0)));
}

static inline uint64_t xxh64_short(const unsigned char *p, size_t len)
{
    uint64_t h = P5 + (uint64_t)len, t;
    t = rotl64(h ^ xxh_round(0, read64(p)), 27) * P1 + P4;
    h = keep_if(len >= 8, t, h);
    t = rotl64(h ^ xxh_round(0, read64(p + 8)), 27) * P1 + P4;
    h = keep_if(len >= 16, t, h);
    t = rotl64(h ^ xxh_round(0, read64(p + 16)), 27) * P1 + P4;
    h = keep_if(len >= 24, t, h);
    const unsigned char *q = p + (len & 24);
    t = rotl64(h ^ (uint64_t)read32(q) * P1, 23) * P2 + P3;
    h = keep_if(len & 4, t, h);
    q += len & 4;
    size_t rem = len & 3;
    t = rotl64(h ^ (uint64_t)q[0] * P5, 11) * P1;
    h = keep_if(rem >= 1, t, h);
    t = rotl64(h ^ (uint64_t)q[1] * P5, 11) * P1;
    h = keep_if(rem >= 2, t, h);
    t = rotl64(h ^ (uint64_t)q[2] * P5, 11) * P1;
    h = keep_if(rem >= 3, t, h);
    return xxh_avalanche(h);
}

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
 * byte and start at most 4 words go whole (~28 -> ~14 us on 30 KB of text).
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
        unsigned t = s | 0x10000;
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

/* buf holds buf_len bytes of words and XXH_PAD more (zeroed here). */
static uint64_t simhash_words(unsigned char *buf, size_t buf_len, const uint32_t *starts, size_t n,
                              size_t shingle)
{
    if (n == 0)
        return 0;
    memset(buf + buf_len, 0, XXH_PAD);
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
            hashes[b] = len < 32 ? xxh64_short(buf + starts[i + b], len) : xxh64(buf + starts[i + b], len);
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
 * compact_byte's branch-free step. str.lower() itself costs ~90 us on a
 * 30 KB text with a few non-ASCII characters; this pass ~30 us. Never
 * longer than compact_unicode's output: a character's lowercase needs no
 * more UTF-8 bytes than its kind allows (the tests check every one). */
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
    w->buf = PyMem_RawMalloc(size + 1 + XXH_PAD);
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

/* attr_values(text, name) -> list[str]: what maintext's class/id scan
 * reads, exactly: the values of the matches of the regex
 *     name\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))
 * found by re.finditer over `text` (leftmost, non-overlapping, case-sensitive;
 * \s is Py_UNICODE_ISSPACE as in re's str patterns), keeping only the matches
 * whose preceding character is one of  \t\n\r\f"'/  (a match at 0 is not
 * kept: "data-id=", "grid=" are no id). `name` is ASCII. Linear: a failed
 * quoted match scans to the next quote of its kind, which only the last
 * such quote of the text can fail to find; see find_name for the rest. */
static int attr_name_before(Py_UCS4 ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '"' || ch == '\'' || ch == '/';
}

/* The start of the next match candidate at or after `pos`: a `name`
 * followed by whitespace and '='. The search goes by '=' (rare in text,
 * memchr on 1-byte strings) and looks back over whitespace for `name`:
 * each '=' has at most one candidate, and candidates come in the order of
 * their '=', so this finds the regex's leftmost match start among those not
 * before `pos`. *eq receives the position of the '='. */
static Py_ssize_t find_name(int kind, const void *data, Py_ssize_t len, const char *name, Py_ssize_t nlen,
                            Py_ssize_t pos, Py_ssize_t *eq)
{
    for (Py_ssize_t e = pos + nlen; e < len; e++) {
        if (kind == PyUnicode_1BYTE_KIND) {
            const unsigned char *base = (const unsigned char *)data;
            const unsigned char *hit = memchr(base + e, '=', (size_t)(len - e));
            if (hit == NULL)
                return -1;
            e = (Py_ssize_t)(hit - base);
        } else if (PyUnicode_READ(kind, data, e) != '=') {
            continue;
        }
        Py_ssize_t p = e;
        while (p > pos && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, p - 1)))
            p--;
        Py_ssize_t at = p - nlen, k = 0;
        if (at < pos)
            continue;
        while (k < nlen && PyUnicode_READ(kind, data, at + k) == (Py_UCS4)(unsigned char)name[k])
            k++;
        if (k == nlen) {
            *eq = e;
            return at;
        }
    }
    return -1;
}

/* The match of the attribute pattern whose '=' is at `j`: 1 with the
 * value in [*vs, *ve) and the match's end in *end, or 0. */
static int attr_match(int kind, const void *data, Py_ssize_t len, Py_ssize_t j, Py_ssize_t *vs, Py_ssize_t *ve,
                      Py_ssize_t *end)
{
    j++; /* the '=' */
    while (j < len && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, j)))
        j++;
    if (j >= len)
        return 0;
    Py_UCS4 c = PyUnicode_READ(kind, data, j);
    if (c == '"' || c == '\'') {
        Py_ssize_t q = j + 1;
        if (kind == PyUnicode_1BYTE_KIND) {
            const unsigned char *base = (const unsigned char *)data;
            const unsigned char *hit = memchr(base + q, (int)c, (size_t)(len - q));
            q = hit == NULL ? len : (Py_ssize_t)(hit - base);
        } else {
            while (q < len && PyUnicode_READ(kind, data, q) != c)
                q++;
        }
        if (q >= len)
            return 0;
        *vs = j + 1;
        *ve = q;
        *end = q + 1;
        return 1;
    }
    Py_ssize_t k = j;
    while (k < len) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, k);
        if (ch == '"' || ch == '\'' || ch == '>' || Py_UNICODE_ISSPACE(ch))
            break;
        k++;
    }
    if (k == j)
        return 0;
    *vs = j;
    *ve = k;
    *end = k;
    return 1;
}

static PyObject *speedups_attr_values(PyObject *self, PyObject *args)
{
    PyObject *text;
    const char *name;
    Py_ssize_t nlen;
    if (!PyArg_ParseTuple(args, "Us#:attr_values", &text, &name, &nlen))
        return NULL;
    if (nlen < 1 || (Py_ssize_t)strlen(name) != nlen) {
        PyErr_SetString(PyExc_ValueError, "attr_values() needs a non-empty name");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < nlen; k++)
        if ((unsigned char)name[k] >= 0x80) {
            PyErr_SetString(PyExc_ValueError, "attr_values() needs an ASCII name");
            return NULL;
        }
    if (PyUnicode_READY(text) < 0)
        return NULL;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t len = PyUnicode_GET_LENGTH(text);
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    Py_ssize_t pos = 0;
    for (;;) {
        Py_ssize_t eq, vs, ve, end, at = find_name(kind, data, len, name, nlen, pos, &eq);
        if (at < 0)
            break;
        if (!attr_match(kind, data, len, eq, &vs, &ve, &end)) {
            pos = at + 1;
            continue;
        }
        pos = end;
        if (at == 0 || !attr_name_before(PyUnicode_READ(kind, data, at - 1)))
            continue;
        PyObject *value = PyUnicode_Substring(text, vs, ve);
        if (value == NULL || PyList_Append(out, value) < 0) {
            Py_XDECREF(value);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(value);
    }
    return out;
}

/* count_over(text, ch, limit) -> bool: text.count(ch) > limit, stopping
 * at the first one past `limit` (memchr on 1-byte strings: ~1 us instead
 * of str.count's ~9 us on a 31 KB page whose '<' are sparse). */
static PyObject *speedups_count_over(PyObject *self, PyObject *args)
{
    PyObject *text;
    int ch;
    Py_ssize_t limit, seen = 0;
    if (!PyArg_ParseTuple(args, "UCn:count_over", &text, &ch, &limit))
        return NULL;
    if (PyUnicode_READY(text) < 0)
        return NULL;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t len = PyUnicode_GET_LENGTH(text);
    if (kind == PyUnicode_1BYTE_KIND) {
        if (ch < 0x100) {
            const unsigned char *p = (const unsigned char *)data, *end = p + len;
            while (seen <= limit && (p = memchr(p, ch, (size_t)(end - p))) != NULL) {
                seen++;
                p++;
            }
        }
    } else {
        for (Py_ssize_t i = 0; i < len && seen <= limit; i++)
            seen += PyUnicode_READ(kind, data, i) == (Py_UCS4)ch;
    }
    return PyBool_FromLong(seen > limit);
}

/* ---------------------------------------------------------------- Links
 *
 * link_anchors(nodes, start, links, index, links_max, base, fallback) -> int
 * does for the run of <a>/<area> nodes at nodes[start:] what links._Scan
 * does for each (`anchor` when the scan is not full), and returns the index
 * of the first node that is neither (or len(nodes)). `base` is the
 * resolver's (scheme, origin, directory or None); the caller passes it only
 * when the resolver is `fast`. `links` (a list of (url, kind, nofollow)
 * tuples) and `index` (url -> position) are the scan's own: the Python code
 * and this share them. An anchor this code does not take in full (a tab or
 * newline in the href, a backslash, a dot segment, a colon in a relative
 * reference, a non-ASCII rel, ...) goes to `fallback(tag, attrs)`, the
 * scan's Python `anchor`, which does the same and more; so the results are
 * the Python code's by construction on those, and by the tests on the rest.
 * A node's tag and attributes are read as the Python code reads them
 * (`node.tag`, `node.attributes`). */

static PyObject *STR_TAG, *STR_ATTRIBUTES, *STR_HREF, *STR_REL, *STR_A, *STR_AREA;

static int ascii_lower(Py_UCS4 c) { return c >= 'A' && c <= 'Z' ? (int)c + 32 : (int)c; }

/* text[at:at+n] equals the lowercase ASCII word `word`, letters in any case */
static int word_at(int kind, const void *data, Py_ssize_t at, Py_ssize_t n, const char *word)
{
    if ((Py_ssize_t)strlen(word) != n)
        return 0;
    for (Py_ssize_t k = 0; k < n; k++)
        if (ascii_lower(PyUnicode_READ(kind, data, at + k)) != word[k])
            return 0;
    return 1;
}

static int has_pair(int kind, const void *data, Py_ssize_t from, Py_ssize_t len, Py_UCS4 a, Py_UCS4 b)
{
    for (Py_ssize_t i = from; i + 1 < len; i++)
        if (PyUnicode_READ(kind, data, i) == a && PyUnicode_READ(kind, data, i + 1) == b)
            return 1;
    return 0;
}

static int has_char(int kind, const void *data, Py_ssize_t from, Py_ssize_t len, Py_UCS4 a)
{
    for (Py_ssize_t i = from; i < len; i++)
        if (PyUnicode_READ(kind, data, i) == a)
            return 1;
    return 0;
}

static int starts_with(int kind, const void *data, Py_ssize_t from, Py_ssize_t len, const char *prefix)
{
    Py_ssize_t n = (Py_ssize_t)strlen(prefix);
    if (len - from < n)
        return 0;
    for (Py_ssize_t k = 0; k < n; k++)
        if (PyUnicode_READ(kind, data, from + k) != (Py_UCS4)(unsigned char)prefix[k])
            return 0;
    return 1;
}

enum { HREF_SKIP = 0, HREF_DONE = 1, HREF_PYTHON = 2 };

/* The anchor's target as links._Scan reads it: HREF_SKIP (not crawlable, no
 * link), HREF_DONE with a new reference in *target, or HREF_PYTHON (the
 * Python code must decide). */
static int anchor_target(PyObject *href, PyObject *base, PyObject **target)
{
    *target = NULL;
    if (href == NULL || href == Py_None)
        return HREF_SKIP;
    if (!PyUnicode_Check(href) || PyUnicode_READY(href) < 0)
        return HREF_PYTHON;
    int kind = PyUnicode_KIND(href);
    const void *data = PyUnicode_DATA(href);
    Py_ssize_t start = 0, end = PyUnicode_GET_LENGTH(href);
    /* clean_href: strip C0 and space at both ends; tab/newline inside: Python */
    while (start < end && PyUnicode_READ(kind, data, start) <= 0x20)
        start++;
    while (end > start && PyUnicode_READ(kind, data, end - 1) <= 0x20)
        end--;
    if (start == end || PyUnicode_READ(kind, data, start) == '#')
        return HREF_SKIP;
    for (Py_ssize_t i = start; i < end; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c == '\t' || c == '\n' || c == '\r' || c == '\\')
            return HREF_PYTHON;
    }
    /* a scheme of javascript:, mailto:, tel:, data: is not crawlable */
    Py_UCS4 c0 = PyUnicode_READ(kind, data, start);
    if ((c0 >= 'A' && c0 <= 'Z') || (c0 >= 'a' && c0 <= 'z')) {
        Py_ssize_t j = start + 1;
        for (; j < end; j++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, j);
            if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '.'
                  || c == '-'))
                break;
        }
        if (j < end && PyUnicode_READ(kind, data, j) == ':') {
            Py_ssize_t n = j - start;
            if (word_at(kind, data, start, n, "javascript") || word_at(kind, data, start, n, "mailto")
                || word_at(kind, data, start, n, "tel") || word_at(kind, data, start, n, "data"))
                return HREF_SKIP;
        }
    }
    /* Resolver.__call__'s fast paths (its base is `fast`) */
    PyObject *scheme = PyTuple_GET_ITEM(base, 0), *origin = PyTuple_GET_ITEM(base, 1);
    PyObject *directory = PyTuple_GET_ITEM(base, 2);
    PyObject *ref = PyUnicode_Substring(href, start, end);
    if (ref == NULL)
        return -1;
    Py_ssize_t len = end - start;
    data = PyUnicode_DATA(ref);
    kind = PyUnicode_KIND(ref);
    if (!has_pair(kind, data, 0, len, '/', '.')) {
        if (starts_with(kind, data, 0, len, "http://") || starts_with(kind, data, 0, len, "https://")) {
            *target = ref;
            return HREF_DONE;
        }
        if (starts_with(kind, data, 0, len, "//")) {
            *target = PyUnicode_FromFormat("%U:%U", scheme, ref);
            Py_DECREF(ref);
            return *target == NULL ? -1 : HREF_DONE;
        }
        if (starts_with(kind, data, 0, len, "/")) {
            *target = PyUnicode_Concat(origin, ref);
            Py_DECREF(ref);
            return *target == NULL ? -1 : HREF_DONE;
        }
    }
    Py_UCS4 first = PyUnicode_READ(kind, data, 0);
    if (directory == Py_None || has_char(kind, data, 0, len, ':') || first == '/' || first == '?' || first == '#') {
        Py_DECREF(ref);
        return HREF_PYTHON;
    }
    /* Resolver._relative: one directory up per leading "../" */
    Py_ssize_t rest = 0, dir_len = PyUnicode_GET_LENGTH(directory);
    int dkind = PyUnicode_KIND(directory);
    const void *ddata = PyUnicode_DATA(directory);
    while (starts_with(kind, data, rest, len, "../")) {
        rest += 3;
        if (dir_len > 1) {
            Py_ssize_t k = dir_len - 2;
            while (k > 0 && PyUnicode_READ(dkind, ddata, k) != '/')
                k--;
            dir_len = k + 1;
        }
    }
    if ((rest < len && PyUnicode_READ(kind, data, rest) == '.') || has_pair(kind, data, rest, len, '/', '.')) {
        Py_DECREF(ref);
        return HREF_PYTHON;
    }
    PyObject *dir = PyUnicode_Substring(directory, 0, dir_len);
    PyObject *tail = dir == NULL ? NULL : PyUnicode_Substring(ref, rest, len);
    Py_DECREF(ref);
    if (tail == NULL) {
        Py_XDECREF(dir);
        return -1;
    }
    *target = PyUnicode_FromFormat("%U%U%U", origin, dir, tail);
    Py_DECREF(dir);
    Py_DECREF(tail);
    return *target == NULL ? -1 : HREF_DONE;
}

/* rel has nofollow, ugc or sponsored among its whitespace-separated words
 * (any case): 0 or 1; 2 when the Python code must read it (not ASCII). */
static int rel_nofollow(PyObject *rel)
{
    if (rel == NULL || rel == Py_None)
        return 0;
    if (!PyUnicode_Check(rel) || PyUnicode_READY(rel) < 0 || !PyUnicode_IS_ASCII(rel))
        return 2;
    const unsigned char *s = PyUnicode_1BYTE_DATA(rel);
    Py_ssize_t len = PyUnicode_GET_LENGTH(rel), i = 0;
    while (i < len) {
        while (i < len && Py_UNICODE_ISSPACE(s[i]))
            i++;
        Py_ssize_t from = i;
        while (i < len && !Py_UNICODE_ISSPACE(s[i]))
            i++;
        Py_ssize_t n = i - from;
        if (n && (word_at(PyUnicode_1BYTE_KIND, s, from, n, "nofollow") || word_at(PyUnicode_1BYTE_KIND, s, from, n, "ugc")
                  || word_at(PyUnicode_1BYTE_KIND, s, from, n, "sponsored")))
            return 1;
    }
    return 0;
}

/* _Scan.add: the first occurrence of a URL is kept (with its kind); a later
 * followed one makes it followed. Steals `url`. */
static int scan_add(PyObject *links, PyObject *index, PyObject *url, PyObject *kind, int nofollow,
                    Py_ssize_t links_max)
{
    PyObject *at = PyDict_GetItemWithError(index, url);
    int rc = 0;
    if (at == NULL) {
        if (PyErr_Occurred()) {
            rc = -1;
        } else if (PyList_GET_SIZE(links) < links_max) {
            PyObject *pos = PyLong_FromSsize_t(PyList_GET_SIZE(links));
            PyObject *item = pos == NULL ? NULL : Py_BuildValue("(OOO)", url, kind, nofollow ? Py_True : Py_False);
            rc = item == NULL || PyDict_SetItem(index, url, pos) < 0 || PyList_Append(links, item) < 0 ? -1 : 0;
            Py_XDECREF(pos);
            Py_XDECREF(item);
        }
    } else if (!nofollow) {
        Py_ssize_t i = PyLong_AsSsize_t(at);
        if (i == -1 && PyErr_Occurred()) {
            rc = -1;
        } else {
            PyObject *old = i >= 0 && i < PyList_GET_SIZE(links) ? PyList_GET_ITEM(links, i) : NULL;
            if (old == NULL || !PyTuple_Check(old) || PyTuple_GET_SIZE(old) != 3) {
                PyErr_SetString(PyExc_ValueError, "link_anchors: index and links disagree");
                rc = -1;
            } else if (PyTuple_GET_ITEM(old, 2) == Py_True) {
                PyObject *item = Py_BuildValue("(OOO)", url, PyTuple_GET_ITEM(old, 1), Py_False);
                rc = item == NULL || PyList_SetItem(links, i, item) < 0 ? -1 : 0; /* steals item */
            }
        }
    }
    Py_DECREF(url);
    return rc;
}

/* One <a>/<area> node: 0 done, -1 error. */
static int take_anchor(PyObject *tag, PyObject *attrs, PyObject *links, PyObject *index, Py_ssize_t links_max,
                       PyObject *base, PyObject *fallback)
{
    PyObject *target = NULL;
    int how = PyDict_Check(attrs) ? anchor_target(PyDict_GetItemWithError(attrs, STR_HREF), base, &target)
                                  : HREF_PYTHON;
    if (how < 0 || PyErr_Occurred()) {
        Py_XDECREF(target);
        return -1;
    }
    if (how == HREF_SKIP)
        return 0;
    int nofollow = how == HREF_DONE ? rel_nofollow(PyDict_GetItemWithError(attrs, STR_REL)) : 2;
    if (PyErr_Occurred()) {
        Py_XDECREF(target);
        return -1;
    }
    if (nofollow == 2) {
        Py_XDECREF(target);
        PyObject *r = PyObject_CallFunctionObjArgs(fallback, tag, attrs, NULL);
        Py_XDECREF(r);
        return r == NULL ? -1 : 0;
    }
    return scan_add(links, index, target, tag, nofollow, links_max);
}

static PyObject *speedups_link_anchors(PyObject *self, PyObject *args)
{
    PyObject *nodes, *links, *index, *base, *fallback;
    Py_ssize_t start, links_max;
    if (!PyArg_ParseTuple(args, "O!nO!O!nO!O:link_anchors", &PyList_Type, &nodes, &start, &PyList_Type, &links,
                          &PyDict_Type, &index, &links_max, &PyTuple_Type, &base, &fallback))
        return NULL;
    if (PyTuple_GET_SIZE(base) != 3 || !PyUnicode_Check(PyTuple_GET_ITEM(base, 0))
        || !PyUnicode_Check(PyTuple_GET_ITEM(base, 1))
        || (PyTuple_GET_ITEM(base, 2) != Py_None && !PyUnicode_Check(PyTuple_GET_ITEM(base, 2)))) {
        PyErr_SetString(PyExc_TypeError, "link_anchors: base must be (scheme, origin, directory or None)");
        return NULL;
    }
    Py_ssize_t i = start < 0 ? 0 : start;
    for (; i < PyList_GET_SIZE(nodes); i++) {
        PyObject *node = PyList_GET_ITEM(nodes, i);
        Py_INCREF(node);
        PyObject *tag = PyObject_GetAttr(node, STR_TAG);
        int anchor = tag != NULL && PyUnicode_Check(tag)
                     && (PyUnicode_Compare(tag, STR_A) == 0 || PyUnicode_Compare(tag, STR_AREA) == 0);
        int rc = tag == NULL ? -1 : 0;
        if (anchor && PyList_GET_SIZE(links) < links_max) {
            PyObject *attrs = PyObject_GetAttr(node, STR_ATTRIBUTES);
            rc = attrs == NULL ? -1 : take_anchor(tag, attrs, links, index, links_max, base, fallback);
            Py_XDECREF(attrs);
        }
        Py_XDECREF(tag);
        Py_DECREF(node);
        if (rc < 0)
            return NULL;
        if (!anchor)
            break;
    }
    return PyLong_FromSsize_t(i);
}

static PyObject *speedups_xxh64(PyObject *self, PyObject *args)
{
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*:xxh64", &view))
        return NULL;
    uint64_t h = xxh64((const unsigned char *)view.buf, (size_t)view.len);
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
    STR_TAG = PyUnicode_InternFromString("tag");
    STR_ATTRIBUTES = PyUnicode_InternFromString("attributes");
    STR_HREF = PyUnicode_InternFromString("href");
    STR_REL = PyUnicode_InternFromString("rel");
    STR_A = PyUnicode_InternFromString("a");
    STR_AREA = PyUnicode_InternFromString("area");
    if (!STR_TAG || !STR_ATTRIBUTES || !STR_HREF || !STR_REL || !STR_A || !STR_AREA)
        return NULL;
    return PyModule_Create(&speedups_module);
}
