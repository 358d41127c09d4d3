/* courtly.core._speedups: XXH64, seed 0, for the SimHash of _speedups.c
 * (header only: every function is static; included by _speedups.c alone). */

#ifndef COURTLY_XXH64_H
#define COURTLY_XXH64_H

#include <stdint.h>
#include <string.h>

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

#endif
