/* courtly.core._speedups: the SimHash of courtly.core.fingerprint, compiled.
 *
 * simhash(data, shingle) -> int computes exactly what the pure-Python
 * `fingerprint.simhash64_py` computes (see the module docstring of
 * fingerprint.py: fingerprints are stored in crawl databases, so the two
 * must agree bit for bit; tests/core/test_fingerprint.py checks it).
 *
 * `data` is a bytes-like object read as words:
 *   - a byte in [A-Za-z0-9_] belongs to a word (A-Z read as a-z);
 *   - any other byte below 0x80 separates words;
 *   - a byte >= 0x80 belongs to a word.
 * So the caller passes either ASCII text as it is (lowercasing and the \w+
 * runs of ASCII happen here), or the UTF-8 of the lowercased \w+ tokens
 * joined by spaces (non-ASCII text, tokenised by Python's re).
 *
 * A shingle is `shingle` consecutive words joined by one space (all words
 * when there are no more than `shingle`); each shingle votes with the 64 bits
 * of its XXH64 (seed 0); bit b of the result is 1 when more than half of the
 * votes have bit b set. No words: 0. Pure: no I/O, no global state; the GIL
 * is released while hashing.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define SHINGLE_MAX 16

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
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

/* ---------------------------------------------------------------- SimHash */

/* WORD[c]: 1 when byte c is part of a word; OUT[c]: what the compacted
 * text holds for it (A-Z lowercased, a separator becomes a space). */
static unsigned char WORD[256];
static unsigned char OUT[256];

static void init_tables(void)
{
    for (int c = 0; c < 256; c++) {
        int word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'
                   || c >= 0x80;
        WORD[c] = (unsigned char)word;
        OUT[c] = (unsigned char)(!word ? ' ' : (c >= 'A' && c <= 'Z') ? c + 32 : c);
    }
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

static inline void votes_add(Votes *v, uint64_t h)
{
    const uint64_t ones = 0x0101010101010101ULL;
    for (int k = 0; k < 8; k++)
        v->acc[k] += (h >> k) & ones;
    if (++v->pending == 255)
        votes_flush(v);
}

/* Copy the words of data[0:len] into buf (lowercased, one space between
 * words); starts[i] is where word i begins in buf. Returns the word count;
 * *buf_len receives the length of the compacted text. Branch-free: words
 * are short, so branching on every word boundary mispredicts a lot. A byte
 * is written always and kept (out advances) when it is a word byte or the
 * first separator after a word; starts[n] is written always and kept when a
 * word begins. buf needs len + 1 bytes, starts len / 2 + 2 entries. */
static size_t compact_words(const unsigned char *data, size_t len, unsigned char *buf, uint32_t *starts,
                            size_t *buf_len)
{
    size_t n = 0, out = 0;
    unsigned prev = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = data[i];
        unsigned w = WORD[c];
        buf[out] = OUT[c];
        starts[n] = (uint32_t)out;
        n += w & (prev ^ 1u);
        out += w | prev;
        prev = w;
    }
    *buf_len = out - (out > 0 && !prev); /* drop a trailing space */
    return n;
}

static uint64_t simhash_words(const unsigned char *buf, size_t buf_len, const uint32_t *starts, size_t n,
                              size_t shingle)
{
    if (n == 0)
        return 0;
    size_t grams = n <= shingle ? 1 : n - shingle + 1;
    Votes v;
    memset(&v, 0, sizeof v);
    for (size_t i = 0; i < grams; i++) {
        size_t last = i + shingle; /* first word after the shingle */
        size_t stop = last >= n ? buf_len : (size_t)starts[last] - 1;
        votes_add(&v, xxh64(buf + starts[i], stop - starts[i]));
    }
    votes_flush(&v);
    uint64_t fp = 0;
    for (int b = 0; b < 64; b++)
        if (2 * v.counts[b] > (uint64_t)grams)
            fp |= (uint64_t)1 << b;
    return fp;
}

static PyObject *speedups_simhash(PyObject *self, PyObject *args)
{
    Py_buffer view;
    int shingle;
    if (!PyArg_ParseTuple(args, "y*i:simhash", &view, &shingle))
        return NULL;
    if (shingle < 1 || shingle > SHINGLE_MAX) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_ValueError, "shingle must be in 1..%d", SHINGLE_MAX);
        return NULL;
    }
    size_t len = (size_t)view.len;
    if (len > UINT32_MAX) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "simhash input larger than 4 GiB");
        return NULL;
    }
    unsigned char *buf = PyMem_RawMalloc(len + 1);
    uint32_t *starts = PyMem_RawMalloc(sizeof(uint32_t) * (len / 2 + 2));
    if (buf == NULL || starts == NULL) {
        PyMem_RawFree(buf);
        PyMem_RawFree(starts);
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    uint64_t fp;
    Py_BEGIN_ALLOW_THREADS
    size_t buf_len;
    size_t n = compact_words((const unsigned char *)view.buf, len, buf, starts, &buf_len);
    fp = simhash_words(buf, buf_len, starts, n, (size_t)shingle);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(buf);
    PyMem_RawFree(starts);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLongLong(fp);
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
     "simhash(data, shingle) -> int: 64-bit SimHash of the words of data (see the module source)."},
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
    return PyModule_Create(&speedups_module);
}
