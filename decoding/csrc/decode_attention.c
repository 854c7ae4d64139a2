/* Attention of a few queries per (row, head) on x86-64 CPUs with AVX2 and FMA: a decoding step.
 *
 * out[b, h, i] = softmax_n(scale * q[b, h, i] . k[b, h, n] + mask[b, h, i or 0, n]) @ v[b, h, :]
 *
 * At a decoding step every (row, head) has a handful of queries (one, or the beams of a sentence
 * folded together) against all cached keys. Done with batched matrix products, that is three
 * passes and many tiny GEMM calls; here each (row, head) is one task that streams its keys once
 * (prefetching keys and values ahead), keeps the scores in a small per-thread buffer, and
 * streams its values once. Masked positions (-inf) get exactly zero weight; a query whose
 * positions are all masked gets NaN, as softmax gives. fp32 only; head_dim a multiple of 16.
 *
 * decode_attention_indexed is the beam-search form: each query (a beam) attends only to the keys
 * listed for it (its ancestors, one per position), so it reads and multiplies those alone instead
 * of every beam's keys under a -inf mask.
 *
 * Built on first use by models/cpu_kernel.py (cc -O3 -mavx2 -mfma -fopenmp) and called through
 * ctypes; tests/test_cpu_kernel.py checks it against the matmul-softmax-matmul reference.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define KEY_AHEAD 64   /* rows of keys fetched ahead in the first pass over them */
#define VALUE_AHEAD 32 /* rows of values fetched ahead in the first pass over them */

/* exp(x) for x <= 0 (a score minus its row maximum); exp(-inf) = 0 exactly. Cephes polynomial (~1 ulp). */
static inline __m256 exp_nonpos(__m256 x) {
    const __m256 is_neg_inf = _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ);
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.33654475f));
    const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i pow2 = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(is_neg_inf, _mm256_mul_ps(y, _mm256_castsi256_ps(pow2)));
}

/* Lane r holds the horizontal sum of a[r]. */
static inline __m256 sum_each8(const __m256 *a) {
    const __m256 s01 = _mm256_hadd_ps(a[0], a[1]), s23 = _mm256_hadd_ps(a[2], a[3]);
    const __m256 s45 = _mm256_hadd_ps(a[4], a[5]), s67 = _mm256_hadd_ps(a[6], a[7]);
    const __m256 s0123 = _mm256_hadd_ps(s01, s23), s4567 = _mm256_hadd_ps(s45, s67);
    return _mm256_add_ps(_mm256_permute2f128_ps(s0123, s4567, 0x20), _mm256_permute2f128_ps(s0123, s4567, 0x31));
}

static inline float sum8(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_hadd_ps(a, a);
    a = _mm_hadd_ps(a, a);
    return _mm_cvtss_f32(a);
}

static inline void fetch_row(const float *row, int64_t bytes, int hint_l1) {
    const char *p = (const char *)row;
    for (int64_t o = 0; o < bytes; o += 64) {
        if (hint_l1) _mm_prefetch(p + o, _MM_HINT_T0);
        else _mm_prefetch(p + o, _MM_HINT_T1);
    }
}

/* Lane r holds q . rows[r] (dim floats each), for 8 key rows. */
static inline __m256 dot8(const float *q, const float *const *rows, int64_t dim) {
    __m256 acc[8];
    for (int r = 0; r < 8; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t d = 0; d < dim; d += 8) {
        const __m256 qd = _mm256_loadu_ps(q + d);
        for (int r = 0; r < 8; ++r) acc[r] = _mm256_fmadd_ps(qd, _mm256_loadu_ps(rows[r] + d), acc[r]);
    }
    return sum_each8(acc);
}

static inline float dot1(const float *q, const float *row, int64_t dim) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t d = 0; d < dim; d += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(row + d), acc);
    return sum8(acc);
}

/* Softmax in place of scores s[0:n] (scaled and masked already; mx is their maximum); s[n:padded]
 * get zero weight. All of a row masked (mx = -inf): NaN, as softmax gives. */
static void softmax_in_place(float *s, int64_t n, int64_t padded, float mx) {
    int64_t j;
    for (j = n; j < padded; ++j) s[j] = -INFINITY;
    if (mx == -INFINITY) { /* nothing to attend to */
        for (j = 0; j < padded; ++j) s[j] = NAN;
        return;
    }
    const __m256 mxv = _mm256_set1_ps(mx);
    __m256 total = _mm256_setzero_ps();
    for (j = 0; j < padded; j += 8) {
        const __m256 e = exp_nonpos(_mm256_sub_ps(_mm256_loadu_ps(s + j), mxv));
        _mm256_storeu_ps(s + j, e);
        total = _mm256_add_ps(total, e);
    }
    const __m256 inv = _mm256_set1_ps(1.0f / sum8(total));
    for (j = 0; j < padded; j += 8) _mm256_storeu_ps(s + j, _mm256_mul_ps(_mm256_loadu_ps(s + j), inv));
}

/* Scores of one query against n_keys keys, scaled, masked (mask may be NULL), then softmax in place.
 * `first` marks the first pass over these keys: fetch keys (and values, for later) ahead. */
static void softmax_scores(const float *q, const float *k, int64_t k_stride, const float *v, int64_t v_stride,
                           int64_t n_keys, int64_t dim, float scale, const float *mask, float *s, int64_t padded,
                           int first) {
    const int64_t row_bytes = dim * (int64_t)sizeof(float);
    int64_t n = 0;
    for (; n + 8 <= n_keys; n += 8) {
        if (first) {
            for (int r = 0; r < 8; ++r) {
                fetch_row(k + (n + KEY_AHEAD + r) * k_stride, row_bytes, 1);
                fetch_row(v + (n + r) * v_stride, row_bytes, 0);
            }
        }
        const float *rows[8];
        for (int r = 0; r < 8; ++r) rows[r] = k + (n + r) * k_stride;
        _mm256_storeu_ps(s + n, dot8(q, rows, dim));
    }
    for (; n < n_keys; ++n) {
        if (first) fetch_row(v + n * v_stride, row_bytes, 0);
        s[n] = dot1(q, k + n * k_stride, dim);
    }
    float mx = -INFINITY;
    for (n = 0; n < n_keys; ++n) {
        const float x = s[n] * scale + (mask ? mask[n] : 0.0f);
        s[n] = x;
        mx = x > mx ? x : mx;
    }
    softmax_in_place(s, n_keys, padded, mx);
}

/* out[i, d:d+16] = sum_n p[i, n] v[n, d:d+16] for QT queries at once (accumulators stay in registers). */
#define WEIGHTED_SUM(QT)                                                                                     \
    static void weighted_sum_##QT(const float *p, int64_t p_stride, const float *v, int64_t v_stride,         \
                                  int64_t n_keys, int64_t d, float *out, int64_t out_stride, int64_t ahead) { \
        __m256 acc[QT][2];                                                                                   \
        for (int i = 0; i < QT; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();                            \
        for (int64_t n = 0; n < n_keys; ++n) {                                                               \
            if (ahead) fetch_row(v + (n + VALUE_AHEAD) * v_stride, ahead, 1);                                \
            const float *vn = v + n * v_stride + d;                                                          \
            const __m256 v0 = _mm256_loadu_ps(vn), v1 = _mm256_loadu_ps(vn + 8);                             \
            for (int i = 0; i < QT; ++i) {                                                                   \
                const __m256 pi = _mm256_broadcast_ss(p + i * p_stride + n);                                 \
                acc[i][0] = _mm256_fmadd_ps(pi, v0, acc[i][0]);                                              \
                acc[i][1] = _mm256_fmadd_ps(pi, v1, acc[i][1]);                                              \
            }                                                                                                \
        }                                                                                                    \
        for (int i = 0; i < QT; ++i) {                                                                       \
            _mm256_storeu_ps(out + i * out_stride + d, acc[i][0]);                                           \
            _mm256_storeu_ps(out + i * out_stride + d + 8, acc[i][1]);                                       \
        }                                                                                                    \
    }
WEIGHTED_SUM(1)
WEIGHTED_SUM(2)
WEIGHTED_SUM(3)
WEIGHTED_SUM(4)
WEIGHTED_SUM(5)
WEIGHTED_SUM(6)

typedef void (*weighted_sum_fn)(const float *, int64_t, const float *, int64_t, int64_t, int64_t, float *, int64_t,
                                int64_t);
static const weighted_sum_fn WEIGHTED_SUMS[7] = {0, weighted_sum_1, weighted_sum_2, weighted_sum_3,
                                                 weighted_sum_4, weighted_sum_5, weighted_sum_6};

/* q, out: contiguous [batch, heads, n_queries, dim]. k, v: [batch, heads, n_keys, dim] with the given
 * strides (in elements; unit stride along dim). mask: NULL or contiguous [batch, heads, mask_rows, n_keys]
 * float with mask_rows 1 (shared by the queries) or n_queries. Returns 0, or -1 when dim % 16 != 0
 * or a buffer cannot be allocated. */
int decode_attention(const float *q, const float *k, const float *v, const float *mask, float *out,
                     int64_t batch, int64_t heads, int64_t n_queries, int64_t n_keys, int64_t dim,
                     int64_t k_stride0, int64_t k_stride1, int64_t k_stride2,
                     int64_t v_stride0, int64_t v_stride1, int64_t v_stride2,
                     int64_t mask_rows, float scale, int threads) {
    if (dim % 16 != 0 || n_queries < 1 || n_keys < 1) return -1;
    const int64_t padded = (n_keys + 7) / 8 * 8;
    const int64_t tasks = batch * heads;
    int failed = 0;
#pragma omp parallel num_threads(threads) reduction(| : failed)
    {
        float *scores = (float *)malloc((size_t)(n_queries * padded) * sizeof(float));
        if (!scores) failed = 1;
#pragma omp for schedule(static)
        for (int64_t task = 0; task < tasks; ++task) {
            if (!scores) continue;
            const int64_t b = task / heads, h = task % heads;
            const float *kb = k + b * k_stride0 + h * k_stride1;
            const float *vb = v + b * v_stride0 + h * v_stride1;
            const float *qb = q + task * n_queries * dim;
            const float *mb = mask ? mask + task * mask_rows * n_keys : 0;
            for (int64_t i = 0; i < n_queries; ++i)
                softmax_scores(qb + i * dim, kb, k_stride2, vb, v_stride2, n_keys, dim, scale,
                               mb ? mb + (mask_rows == 1 ? 0 : i) * n_keys : 0, scores + i * padded, padded, i == 0);
            float *ob = out + task * n_queries * dim;
            for (int64_t d = 0; d < dim; d += 16) {
                const int64_t ahead = d == 0 ? dim * (int64_t)sizeof(float) : 0;
                for (int64_t i = 0; i < n_queries; i += 6) {
                    const int64_t tile = n_queries - i < 6 ? n_queries - i : 6;
                    WEIGHTED_SUMS[tile](scores + i * padded, padded, vb, v_stride2, n_keys, d, ob + i * dim, dim, ahead);
                }
            }
        }
        free(scores);
    }
    return failed ? -1 : 0;
}

/* Softmax of one query's scores over the keys it may attend to: k[index[j]] for j < n_index. */
static void indexed_softmax_scores(const float *q, const float *k, int64_t k_stride, const float *v,
                                   int64_t v_stride, const int32_t *index, int64_t n_index, int64_t dim,
                                   float scale, const float *mask, float *s, int64_t padded) {
    const int64_t row_bytes = dim * (int64_t)sizeof(float);
    int64_t j = 0;
    for (; j + 8 <= n_index; j += 8) {
        if (j + 16 <= n_index)
            for (int r = 0; r < 8; ++r) fetch_row(k + (int64_t)index[j + 8 + r] * k_stride, row_bytes, 1);
        for (int r = 0; r < 8; ++r) fetch_row(v + (int64_t)index[j + r] * v_stride, row_bytes, 0); /* for the sum */
        const float *rows[8];
        for (int r = 0; r < 8; ++r) rows[r] = k + (int64_t)index[j + r] * k_stride;
        _mm256_storeu_ps(s + j, dot8(q, rows, dim));
    }
    for (; j < n_index; ++j) s[j] = dot1(q, k + (int64_t)index[j] * k_stride, dim);
    float mx = -INFINITY;
    for (j = 0; j < n_index; ++j) {
        const float x = s[j] * scale + (mask ? mask[index[j]] : 0.0f);
        s[j] = x;
        mx = x > mx ? x : mx;
    }
    softmax_in_place(s, n_index, padded, mx);
}

/* out[d0:d0+16*CH] = sum_j p[j] v[index[j], d0:...] for one query, CH (1..4) chunks of 16 floats in registers. */
#define INDEXED_SUM(CH)                                                                                      \
    static void indexed_sum_##CH(const float *p, const float *v, int64_t v_stride, const int32_t *index,     \
                                 int64_t n_index, int64_t d0, float *out) {                                  \
        __m256 acc[2 * CH];                                                                                  \
        for (int c = 0; c < 2 * CH; ++c) acc[c] = _mm256_setzero_ps();                                      \
        for (int64_t j = 0; j < n_index; ++j) {                                                              \
            const float *vj = v + (int64_t)index[j] * v_stride + d0;                                         \
            const __m256 pj = _mm256_broadcast_ss(p + j);                                                    \
            for (int c = 0; c < 2 * CH; ++c) acc[c] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 8 * c), acc[c]); \
        }                                                                                                    \
        for (int c = 0; c < 2 * CH; ++c) _mm256_storeu_ps(out + d0 + 8 * c, acc[c]);                         \
    }
INDEXED_SUM(1)
INDEXED_SUM(2)
INDEXED_SUM(3)
INDEXED_SUM(4)

typedef void (*indexed_sum_fn)(const float *, const float *, int64_t, const int32_t *, int64_t, int64_t, float *);
static const indexed_sum_fn INDEXED_SUMS[5] = {0, indexed_sum_1, indexed_sum_2, indexed_sum_3, indexed_sum_4};

/* As decode_attention, but query i of row b attends only to the keys index[b, i, :n_index] (int32,
 * contiguous [batch, n_queries, n_index], each in [0, n_keys)); every other key weighs zero and is
 * never read. At a beam-search step the beams of a sentence are the queries and each one's keys are
 * its ancestors: one key per position instead of one per position and beam. The mask, if any, is
 * read at the indexed keys only. Returns 0, or -1 on bad sizes, an index out of range, or no memory. */
int decode_attention_indexed(const float *q, const float *k, const float *v, const float *mask, const int32_t *index,
                             float *out, int64_t batch, int64_t heads, int64_t n_queries, int64_t n_keys,
                             int64_t n_index, int64_t dim, int64_t k_stride0, int64_t k_stride1, int64_t k_stride2,
                             int64_t v_stride0, int64_t v_stride1, int64_t v_stride2, int64_t mask_rows,
                             float scale, int threads) {
    if (dim % 16 != 0 || n_queries < 1 || n_keys < 1 || n_index < 1) return -1;
    for (int64_t i = 0; i < batch * n_queries * n_index; ++i)
        if (index[i] < 0 || index[i] >= n_keys) return -1;
    const int64_t padded = (n_index + 7) / 8 * 8;
    const int64_t tasks = batch * heads;
    int failed = 0;
#pragma omp parallel num_threads(threads) reduction(| : failed)
    {
        float *scores = (float *)malloc((size_t)padded * sizeof(float));
        if (!scores) failed = 1;
#pragma omp for schedule(static)
        for (int64_t task = 0; task < tasks; ++task) {
            if (!scores) continue;
            const int64_t b = task / heads, h = task % heads;
            const float *kb = k + b * k_stride0 + h * k_stride1;
            const float *vb = v + b * v_stride0 + h * v_stride1;
            if (task + 1 < tasks) { /* fetch the next task's keys and values (first query's list) into L2 */
                const int64_t nb = (task + 1) / heads, nh = (task + 1) % heads;
                const float *kn = k + nb * k_stride0 + nh * k_stride1, *vn = v + nb * v_stride0 + nh * v_stride1;
                const int32_t *ixn = index + nb * n_queries * n_index;
                for (int64_t j = 0; j < n_index; ++j) {
                    fetch_row(kn + (int64_t)ixn[j] * k_stride2, dim * (int64_t)sizeof(float), 0);
                    fetch_row(vn + (int64_t)ixn[j] * v_stride2, dim * (int64_t)sizeof(float), 0);
                }
            }
            for (int64_t i = 0; i < n_queries; ++i) {
                const int32_t *ix = index + (b * n_queries + i) * n_index;
                const float *mi = mask ? mask + (task * mask_rows + (mask_rows == 1 ? 0 : i)) * n_keys : 0;
                float *oi = out + (task * n_queries + i) * dim;
                indexed_softmax_scores(q + (task * n_queries + i) * dim, kb, k_stride2, vb, v_stride2, ix, n_index,
                                       dim, scale, mi, scores, padded);
                for (int64_t d0 = 0; d0 < dim; d0 += 64) {
                    const int64_t chunks = (dim - d0) / 16 < 4 ? (dim - d0) / 16 : 4;
                    INDEXED_SUMS[chunks](scores, vb, v_stride2, ix, n_index, d0, oi);
                }
            }
        }
        free(scores);
    }
    return failed ? -1 : 0;
}
