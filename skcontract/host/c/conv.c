/* Direct convolutions on the CPU, NCHW output: the depthwise one (one filter a channel,
 * groups == C == K) and the grouped one (a few channels a group, as ResNeXt's).
 *
 * Depthwise. Each (image, channel) plane is copied into a thread's buffer of zero-padded phase planes:
 * phase (a, b) holds the padded input rows a, a + sh, ... and columns b, b + sw, ..., so that
 * tap (r, s) reads one phase at one offset for every output pixel. Over a phase plane of
 * width PW the output grid is flat: pixel (p, q) is grid element p PW + q (the PW - Q columns
 * after each row are computed and thrown away), and tap (r, s) adds
 * w[r, s] * phase[(r dh) % sh][(s dw) % sw][grid + (r dh / sh) PW + (s dw / sw)].
 * So every tap is one contiguous multiply-add over the grid, in blocks of NB vectors held in
 * registers while all R S taps are added; the buffer (a few KiB to a few hundred KiB) stays
 * in cache between the taps. Each output is summed in the dtype (as torch's CPU
 * convolution sums float32) in tap order, and written once.
 *
 * Small planes (short output rows) waste most of such a grid's columns and blocks; there the
 * lanes form runs instead (`*_lanes`): a vector holds one pixel of LANES channels, the
 * block's input copied into a zero-padded (rows, columns, LANES) buffer, so that every tap
 * of every pixel is one aligned vector load, at any stride and dilation, with no column
 * computed that is not kept; QB pixels of a row are summed at once, each tap's weights
 * loaded once for them.
 *
 * Grouped (`grouped_*`). The planes form over a group's C/G input channels: each (image,
 * group, band of output rows) fills C/G phase planes of the band's rows (bands keep them
 * in cache), and a block of the grid sums KB output channels at once,
 * NB vectors each, over the group's channels and taps: each vector loaded serves KB output
 * channels, each filter value (broadcast) NB vectors.
 *
 * The input is read at any element strides (NCHW, channels-last or a view); the weight is
 * dense (C, R, S); the output dense NCHW. A call runs planes [first, last) (channel blocks
 * [first, last) for `*_lanes`), so that callers split them over threads; `scratch` holds
 * dw_scratch_elems(...) (dw_lanes_scratch_elems(...)) elements, 64-byte aligned, and is
 * the calling thread's own. */
#include <stddef.h>
#include <string.h>

#define VEC_BYTES 64 /* a vector of the widest ISA (AVX-512); narrower ones split it */
#define NB 4         /* vectors a block of the grid: its sums stay in registers */
#define QB 8         /* pixels a block of the lanes form: its sums stay in registers */
#define KB 8         /* output channels a block of the grouped form, at most */
#define GNB 2        /* vectors a block of the grouped form's grid, for each channel */

typedef ptrdiff_t idx;

/* the constants the Python side mirrors (skcontract/host: VECTOR_BYTES,
 * PLANES_BLOCK_VECTORS, MAX_TAPS), read back by its tests */
idx host_vector_bytes(void) { return VEC_BYTES; }
idx host_planes_block_vectors(void) { return NB; }

/* the phase planes' geometry, shared by the scratch size and the kernels */
struct dw_shape {
    idx rows;  /* rows of a phase plane: the output rows and the taps' reach */
    idx width; /* PW: the output columns and the taps' reach */
    idx plane; /* elements of one phase plane, with the last block's slack */
};

static struct dw_shape dw_shape_of(idx p, idx q, idx r, idx s, idx sh, idx sw, idx dh,
                                   idx dw, idx block)
{
    struct dw_shape g;
    g.rows = p + ((r - 1) * dh) / sh;
    g.width = q + ((s - 1) * dw) / sw;
    /* the grid's last block, rounded up, and the taps' column reach read past the last
     * row: at most a row and a block */
    g.plane = g.rows * g.width + g.width + block;
    return g;
}

idx dw_scratch_elems(idx p, idx q, idx r, idx s, idx sh, idx sw, idx dh, idx dw,
                     idx itemsize)
{
    idx block = NB * (VEC_BYTES / itemsize);
    struct dw_shape g = dw_shape_of(p, q, r, s, sh, sw, dh, dw, block);
    /* the grid in whole blocks */
    idx grid = (p * g.width + block - 1) / block * block;
    return sh * sw * g.plane + grid;
}

/* the lanes form's buffer: the block's padded input and its weights, (taps, LANES) */
idx dw_lanes_scratch_elems(idx p, idx q, idx r, idx s, idx sh, idx sw, idx dh, idx dw,
                           idx itemsize)
{
    idx lanes = VEC_BYTES / itemsize;
    idx rows = (p - 1) * sh + (r - 1) * dh + 1, cols = (q - 1) * sw + (s - 1) * dw + 1;
    return (rows * cols + r * s) * lanes;
}

#define DEFINE_DEPTHWISE(NAME, T)                                                          \
typedef T NAME##_vec __attribute__((vector_size(VEC_BYTES)));                               \
enum { NAME##_lane_count = VEC_BYTES / sizeof(T) };                                             \
                                                                                            \
static inline NAME##_vec NAME##_load(const T *p)                                            \
{                                                                                           \
    NAME##_vec v;                                                                           \
    memcpy(&v, p, sizeof v);                                                                \
    return v;                                                                               \
}                                                                                           \
                                                                                            \
/* phase (a, b) of the planes of the cg channels at x (one element apart where cg > 1: a   \
 * channels-last input, each pixel's channels read together; plane ch at phases + ch span):\
 * input row i maps to padded row i + top, column j to padded column j + left; phase       \
 * element (u, v) is padded (u sh + a, v sw + b). Only the columns on the input are        \
 * written (zeros on the rows off it): the rest stay as the caller zeroed them */          \
static void NAME##_fill(const T *x, idx sxh, idx sxw, idx h, idx w, idx top, idx left,      \
                        idx sh, idx sw, struct dw_shape g, T *phases, idx cg, idx span)     \
{                                                                                           \
    for (idx a = 0; a < sh; ++a) {                                                          \
        for (idx b = 0; b < sw; ++b) {                                                      \
            T *phase = phases + (a * sw + b) * g.plane;                                     \
            /* the phase columns on input columns: v sw + b - left in [0, w) */             \
            idx v0 = left > b ? (left - b + sw - 1) / sw : 0;                               \
            idx v1 = (w - 1 + left - b) / sw + 1;                                           \
            if (v1 > g.width) v1 = g.width;                                                 \
            if (w - 1 + left - b < 0 || v1 <= v0) continue;                                 \
            for (idx u = 0; u < g.rows; ++u) {                                              \
                idx i = u * sh + a - top;                                                   \
                T *dst = phase + u * g.width;                                               \
                if (i < 0 || i >= h) { /* a padding row: another band's data may lie here */\
                    for (idx ch = 0; ch < cg; ++ch)                                         \
                        memset(dst + ch * span + v0, 0, sizeof(T) * (v1 - v0));            \
                    continue;                                                               \
                }                                                                           \
                const T *src = x + i * sxh + (v0 * sw + b - left) * sxw;                    \
                idx step = sw * sxw;                                                        \
                if (cg == 1 && step == 1) {                                                 \
                    memcpy(dst + v0, src, sizeof(T) * (v1 - v0));                           \
                } else {                                                                    \
                    for (idx v = v0; v < v1; ++v, src += step)                              \
                        for (idx ch = 0; ch < cg; ++ch) dst[ch * span + v] = src[ch];       \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
}                                                                                           \
                                                                                            \
void NAME(const T *x, const T *weight, T *out, idx c, idx h, idx w, idx p, idx q,           \
          idx r, idx s, idx sh, idx sw, idx dh, idx dw, idx top, idx left,                  \
          idx sxn, idx sxc, idx sxh, idx sxw, idx first, idx last, T *scratch)              \
{                                                                                           \
    const idx block = NB * NAME##_lane_count;                                                    \
    struct dw_shape g = dw_shape_of(p, q, r, s, sh, sw, dh, dw, block);                     \
    T *phases = scratch, *grid = scratch + sh * sw * g.plane;                               \
    const idx cells = p * g.width, count = r * s;                                          \
    idx offset[count]; /* each tap's read, from the phase planes' start */                 \
    for (idx i = 0; i < r; ++i)                                                             \
        for (idx j = 0; j < s; ++j)                                                         \
            offset[i * s + j] = (((i * dh) % sh) * sw + (j * dw) % sw) * g.plane           \
                                + ((i * dh) / sh) * g.width + (j * dw) / sw;                \
    /* the padding lies at the same places in every plane: zeroed once, never written */    \
    memset(phases, 0, sizeof(T) * sh * sw * g.plane);                                       \
    for (idx plane = first; plane < last; ++plane) {                                        \
        idx n = plane / c, ch = plane % c;                                                  \
        const T *taps = weight + ch * count;                                                \
        NAME##_fill(x + n * sxn + ch * sxc, sxh, sxw, h, w, top, left, sh, sw, g, phases,   \
                    1, 0);                                                                  \
        for (idx at = 0; at < cells; at += block) {                                         \
            NAME##_vec sum[NB];                                                             \
            for (int k = 0; k < NB; ++k) sum[k] = (NAME##_vec){0};                          \
            for (idx t = 0; t < count; ++t) {                                               \
                const T *src = phases + offset[t] + at;                                     \
                T tap = taps[t];                                                            \
                for (int k = 0; k < NB; ++k)                                                \
                    sum[k] += tap * NAME##_load(src + k * NAME##_lane_count);                    \
            }                                                                               \
            memcpy(grid + at, sum, sizeof sum);                                             \
        }                                                                                   \
        T *dst = out + plane * p * q;                                                       \
        for (idx row = 0; row < p; ++row)                                                   \
            memcpy(dst + row * q, grid + row * g.width, sizeof(T) * q);                     \
    }                                                                                       \
}                                                                                           \
                                                                                            \
/* Block b of LANES channels of image n (channel block b of the C / LANES, rounded up, of  \
 * each image), lanes form: buffer (rows, cols, LANES) of the padded input, taps (R S,     \
 * LANES); in a short last block the lanes past C keep an earlier block's input, their     \
 * taps are zero and their sums never stored */                                             \
void NAME##_lanes(const T *x, const T *weight, T *out, idx c, idx h, idx w, idx p, idx q,   \
                  idx r, idx s, idx sh, idx sw, idx dh, idx dw, idx top, idx left,          \
                  idx sxn, idx sxc, idx sxh, idx sxw, idx first, idx last, T *scratch)      \
{                                                                                           \
    const idx L = NAME##_lane_count, blocks = (c + L - 1) / L;                                   \
    const idx rows = (p - 1) * sh + (r - 1) * dh + 1, cols = (q - 1) * sw + (s - 1) * dw + 1;\
    T *buf = scratch, *taps = scratch + rows * cols * L;                                    \
    memset(buf, 0, sizeof(T) * rows * cols * L);                                            \
    /* the input rows and columns a block's buffer holds (the rest is padding) */          \
    idx i0 = top, i1 = top + h < rows ? top + h : rows;                                    \
    idx j0 = left, j1 = left + w < cols ? left + w : cols;                                 \
    for (idx blk = first; blk < last; ++blk) {                                              \
        idx n = blk / blocks, c0 = (blk % blocks) * L;                                      \
        idx width = c - c0 < L ? c - c0 : L;                                                \
        for (idx l = 0; l < L; ++l)                                                         \
            for (idx t = 0; t < r * s; ++t)                                                 \
                taps[t * L + l] = l < width ? weight[(c0 + l) * r * s + t] : (T)0;          \
        for (idx l = 0; l < width; ++l) {                                                   \
            const T *src = x + n * sxn + (c0 + l) * sxc;                                    \
            for (idx i = i0; i < i1; ++i)                                                   \
                for (idx j = j0; j < j1; ++j)                                               \
                    buf[(i * cols + j) * L + l] = src[(i - top) * sxh + (j - left) * sxw];  \
        }                                                                                   \
        T *dst = out + (n * c + c0) * p * q;                                                \
        for (idx pix = 0; pix < p * q; pix += QB) {                                         \
            /* QB pixels in the output's order (the last block's extra ones repeat its     \
             * last pixel and are not stored): each one's first tap in the buffer */        \
            idx at[QB];                                                                     \
            for (int k = 0; k < QB; ++k) {                                                  \
                idx e = pix + k < p * q ? pix + k : p * q - 1;                              \
                at[k] = ((e / q) * sh * cols + (e % q) * sw) * L;                           \
            }                                                                               \
            NAME##_vec sum[QB];                                                             \
            for (int k = 0; k < QB; ++k) sum[k] = (NAME##_vec){0};                          \
            for (idx i = 0; i < r; ++i) {                                                   \
                for (idx j = 0; j < s; ++j) {                                               \
                    NAME##_vec tap = NAME##_load(taps + (i * s + j) * L);                   \
                    const T *line = buf + (i * dh * cols + j * dw) * L;                     \
                    for (int k = 0; k < QB; ++k)                                            \
                        sum[k] += tap * NAME##_load(line + at[k]);                          \
                }                                                                           \
            }                                                                               \
            T kept[QB][L];                                                                  \
            memcpy(kept, sum, sizeof kept);                                                 \
            idx count = p * q - pix < QB ? p * q - pix : QB;                                \
            for (idx l = 0; l < width; ++l)                                                 \
                for (idx k = 0; k < count; ++k) dst[l * p * q + pix + k] = kept[k][l];      \
        }                                                                                   \
    }                                                                                       \
}

DEFINE_DEPTHWISE(depthwise_f32, float)
DEFINE_DEPTHWISE(depthwise_f64, double)

/* Depthwise, channels-last (`*_nhwc`): input (N, H, W, C) with the channels contiguous
 * (any other strides), weight (R S, C), output dense (N, P, Q, C). A vector holds LANES
 * channels of one pixel, so every tap is one load of the input as it lies and one of the
 * weights, with no copy on either side. Away from the border QB pixels of a row are summed
 * at once, a channel vector at a time, each tap's weights loaded once for them; a pixel
 * near the border sums CB vectors at once over the taps that fall on the input, each in
 * two (the channels past the blocks, four) partial sums over the tap columns, so that
 * enough multiply-adds are in flight. Units: (image, output row) pairs. */
#define CB 4 /* channel vectors of a border pixel summed at once */
#define DEFINE_DEPTHWISE_NHWC(NAME, T, DW)                                                  \
static inline void NAME##_pixel(const T *x, const T *weight, T *dst, idx c, idx s,          \
                                idx sxh, idx sxw, idx dh, idx dw, idx r0, idx r1, idx s0,   \
                                idx s1)                                                     \
{                                                                                           \
    const idx lanes = DW##_lane_count;                                                      \
    idx c0 = 0;                                                                             \
    for (; c0 + CB * lanes <= c; c0 += CB * lanes) {                                        \
        /* two sums a vector, over even and odd tap columns: 2 CB chains of FMAs in flight */\
        DW##_vec even[CB], odd[CB];                                                         \
        for (int k = 0; k < CB; ++k) even[k] = odd[k] = (DW##_vec){0};                      \
        for (idx i = r0; i < r1; ++i) {                                                     \
            const T *src = x + i * dh * sxh + c0, *tap = weight + i * s * c + c0;           \
            idx j = s0;                                                                     \
            for (; j + 1 < s1; j += 2)                                                      \
                for (int k = 0; k < CB; ++k) {                                              \
                    even[k] += DW##_load(tap + j * c + k * lanes)                           \
                               * DW##_load(src + j * dw * sxw + k * lanes);                 \
                    odd[k] += DW##_load(tap + (j + 1) * c + k * lanes)                      \
                              * DW##_load(src + (j + 1) * dw * sxw + k * lanes);            \
                }                                                                           \
            if (j < s1)                                                                     \
                for (int k = 0; k < CB; ++k)                                                \
                    even[k] += DW##_load(tap + j * c + k * lanes)                           \
                               * DW##_load(src + j * dw * sxw + k * lanes);                 \
        }                                                                                   \
        for (int k = 0; k < CB; ++k) even[k] += odd[k];                                     \
        memcpy(dst + c0, even, sizeof even);                                                \
    }                                                                                       \
    for (; c0 + lanes <= c; c0 += lanes) {                                                  \
        /* one vector: four sums, over the tap columns mod 4 */                             \
        DW##_vec part[4] = {{0}, {0}, {0}, {0}};                                            \
        for (idx i = r0; i < r1; ++i) {                                                     \
            const T *src = x + i * dh * sxh + c0, *tap = weight + i * s * c + c0;           \
            idx j = s0;                                                                     \
            for (; j + 3 < s1; j += 4)                                                      \
                for (int u = 0; u < 4; ++u)                                                 \
                    part[u] += DW##_load(tap + (j + u) * c)                                 \
                               * DW##_load(src + (j + u) * dw * sxw);                       \
            for (int u = 0; j < s1; ++j, ++u)                                               \
                part[u] += DW##_load(tap + j * c) * DW##_load(src + j * dw * sxw);          \
        }                                                                                   \
        DW##_vec sum = (part[0] + part[1]) + (part[2] + part[3]);                           \
        memcpy(dst + c0, &sum, sizeof sum);                                                 \
    }                                                                                       \
    for (; c0 < c; ++c0) {                                                                  \
        T sum = 0;                                                                          \
        for (idx i = r0; i < r1; ++i)                                                       \
            for (idx j = s0; j < s1; ++j)                                                   \
                sum += weight[(i * s + j) * c + c0] * x[i * dh * sxh + j * dw * sxw + c0];  \
        dst[c0] = sum;                                                                      \
    }                                                                                       \
}                                                                                           \
                                                                                            \
/* QB pixels of a row whose taps all fall on the input (columns): each tap's weights     \
 * loaded once for the QB pixels, a sum a pixel; the channels past the vectors pixel by    \
 * pixel */                                                                                 \
static inline void NAME##_interior(const T *x, const T *weight, T *dst, idx c, idx s,       \
                                   idx sxh, idx sxw, idx sw, idx dh, idx dw, idx r0, idx r1)\
{                                                                                           \
    const idx lanes = DW##_lane_count;                                                      \
    idx c0 = 0;                                                                             \
    for (; c0 + lanes <= c; c0 += lanes) {                                                  \
        DW##_vec sum[QB];                                                                   \
        for (int k = 0; k < QB; ++k) sum[k] = (DW##_vec){0};                                \
        for (idx i = r0; i < r1; ++i) {                                                     \
            const T *src = x + i * dh * sxh + c0, *tap = weight + i * s * c + c0;           \
            for (idx j = 0; j < s; ++j) {                                                   \
                DW##_vec wv = DW##_load(tap + j * c);                                       \
                const T *at = src + j * dw * sxw;                                           \
                for (int k = 0; k < QB; ++k)                                                \
                    sum[k] += wv * DW##_load(at + k * sw * sxw);                            \
            }                                                                               \
        }                                                                                   \
        for (int k = 0; k < QB; ++k) memcpy(dst + k * c + c0, &sum[k], sizeof sum[k]);      \
    }                                                                                       \
    for (int k = 0; k < QB && c0 < c; ++k)                                                  \
        for (idx ch = c0; ch < c; ++ch) {                                                   \
            T sum = 0;                                                                      \
            for (idx i = r0; i < r1; ++i)                                                   \
                for (idx j = 0; j < s; ++j)                                                 \
                    sum += weight[(i * s + j) * c + ch]                                     \
                           * x[k * sw * sxw + i * dh * sxh + j * dw * sxw + ch];            \
            dst[k * c + ch] = sum;                                                          \
        }                                                                                   \
}                                                                                           \
                                                                                            \
void NAME(const T *x, const T *weight, T *out, idx c, idx h, idx w, idx p, idx q,           \
          idx r, idx s, idx sh, idx sw, idx dh, idx dw, idx top, idx left,                  \
          idx sxn, idx sxh, idx sxw, idx first, idx last)                                   \
{                                                                                           \
    for (idx unit = first; unit < last; ++unit) {                                           \
        idx n = unit / p, row = unit % p, h0 = row * sh - top;                              \
        /* the tap rows on the input: h0 + i dh in [0, h) */                               \
        idx r0 = h0 < 0 ? (-h0 + dh - 1) / dh : 0;                                          \
        idx r1 = h - h0 <= 0 ? 0 : (h - 1 - h0) / dh + 1;                                   \
        if (r1 > r) r1 = r;                                                                 \
        /* the columns whose taps all fall on the input: w0 >= 0, w0 + (s - 1) dw < w */   \
        idx qa = (left + sw - 1) / sw, qb = w - 1 - (s - 1) * dw + left < 0 ? 0             \
                 : (w - 1 - (s - 1) * dw + left) / sw + 1;                                  \
        if (qb > q) qb = q;                                                                 \
        for (idx col = 0; col < q; ++col) {                                                 \
            if (col >= qa && col < qb && qb - qa >= QB && r1 > r0) {                        \
                /* the last block ends at qb, over pixels the one before summed: the same  \
                 * sums, written again */                                                   \
                idx at = col + QB <= qb ? col : qb - QB;                                    \
                /* pointers at the first tap on the input, the taps counted from it */    \
                NAME##_interior(x + n * sxn + (h0 + r0 * dh) * sxh + (at * sw - left) * sxw,\
                                weight + r0 * s * c, out + ((n * p + row) * q + at) * c, c, \
                                s, sxh, sxw, sw, dh, dw, 0, r1 - r0);                       \
                col = at + QB - 1;                                                          \
                continue;                                                                   \
            }                                                                               \
            idx w0 = col * sw - left;                                                       \
            idx s0 = w0 < 0 ? (-w0 + dw - 1) / dw : 0;                                      \
            idx s1 = w - w0 <= 0 ? 0 : (w - 1 - w0) / dw + 1;                               \
            if (s1 > s) s1 = s;                                                             \
            T *dst = out + ((n * p + row) * q + col) * c;                                   \
            if (r1 <= r0 || s1 <= s0) {                                                     \
                memset(dst, 0, sizeof(T) * c);                                              \
                continue;                                                                   \
            }                                                                               \
            NAME##_pixel(x + n * sxn + (h0 + r0 * dh) * sxh + (w0 + s0 * dw) * sxw,         \
                         weight + (r0 * s + s0) * c, dst, c, s, sxh, sxw, dh, dw, 0, r1 - r0,\
                         0, s1 - s0);                                                       \
        }                                                                                   \
    }                                                                                       \
}

DEFINE_DEPTHWISE_NHWC(depthwise_nhwc_f32, float, depthwise_f32)
DEFINE_DEPTHWISE_NHWC(depthwise_nhwc_f64, double, depthwise_f64)

/* the grouped form's buffer: a group's phase planes for a band of `band` output rows, then
 * KB grids */
idx grouped_scratch_elems(idx cg, idx band, idx q, idx r, idx s, idx sh, idx sw, idx dh,
                          idx dw, idx itemsize)
{
    idx p = band;
    idx block = GNB * (VEC_BYTES / itemsize);
    struct dw_shape g = dw_shape_of(p, q, r, s, sh, sw, dh, dw, block);
    idx grid = (p * g.width + block - 1) / block * block;
    return cg * sh * sw * g.plane + KB * grid;
}

/* KBV output channels (k0 .. k0 + KBV - 1) of one group over the whole grid, into grids */
#define DEFINE_GROUPED_BLOCK(NAME, T, KBV)                                                  \
static void NAME##_block##KBV(const T *phases, const T *weight, idx cg, idx count,          \
                              const idx *offset, idx span, idx cells, idx stride, T *grids) \
{                                                                                           \
    const idx lanes = NAME##_lane_count, block = GNB * lanes;                               \
    for (idx at = 0; at < cells; at += block) {                                             \
        NAME##_vec sum[KBV][GNB];                                                           \
        for (int kk = 0; kk < KBV; ++kk)                                                    \
            for (int v = 0; v < GNB; ++v) sum[kk][v] = (NAME##_vec){0};                     \
        for (idx ch = 0; ch < cg; ++ch) {                                                   \
            const T *plane = phases + ch * span + at;                                       \
            const T *taps = weight + ch * count;                                            \
            for (idx t = 0; t < count; ++t) {                                               \
                NAME##_vec v[GNB];                                                          \
                for (int u = 0; u < GNB; ++u) v[u] = NAME##_load(plane + offset[t] + u * lanes);\
                for (int kk = 0; kk < KBV; ++kk) {                                          \
                    T tap = taps[kk * cg * count + t];                                      \
                    for (int u = 0; u < GNB; ++u) sum[kk][u] += tap * v[u];                 \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
        for (int kk = 0; kk < KBV; ++kk)                                                    \
            memcpy(grids + kk * stride + at, sum[kk], sizeof sum[kk]);                      \
    }                                                                                       \
}

#define DEFINE_GROUPED(NAME, T, DW)                                                         \
DEFINE_GROUPED_BLOCK(DW, T, 8)                                                              \
DEFINE_GROUPED_BLOCK(DW, T, 4)                                                              \
DEFINE_GROUPED_BLOCK(DW, T, 1)                                                              \
                                                                                            \
/* units [first, last) of (group, image, band of `band` output rows):                       \
 * unit = (g N + n) bands + b, a group's units together so that its filters stay in cache  \
 * from one image to the next; weight (K, C/G, R, S), dense; the output at element strides \
 * (son, sok, sop, soq): NCHW, or channels-last beside a channels-last input */             \
void NAME(const T *x, const T *weight, T *out, idx c, idx h, idx w, idx p, idx q,           \
          idx r, idx s, idx sh, idx sw, idx dh, idx dw, idx top, idx left,                  \
          idx sxn, idx sxc, idx sxh, idx sxw, idx groups, idx k, idx band, idx images,      \
          idx son, idx sok, idx sop, idx soq, idx first, idx last, T *scratch)              \
{                                                                                           \
    const idx block = GNB * DW##_lane_count, cg = c / groups, kg = k / groups;             \
    const idx count = r * s, bands = (p + band - 1) / band;                                 \
    struct dw_shape g = dw_shape_of(band, q, r, s, sh, sw, dh, dw, block);                  \
    const idx span = sh * sw * g.plane;                                                     \
    const idx stride = (band * g.width + block - 1) / block * block;                        \
    T *phases = scratch, *grids = scratch + cg * span;                                      \
    idx offset[count];                                                                      \
    for (idx i = 0; i < r; ++i)                                                             \
        for (idx j = 0; j < s; ++j)                                                         \
            offset[i * s + j] = (((i * dh) % sh) * sw + (j * dw) % sw) * g.plane           \
                                + ((i * dh) / sh) * g.width + (j * dw) / sw;                \
    memset(phases, 0, sizeof(T) * cg * span); /* the padding columns: zeroed once */        \
    for (idx unit = first; unit < last; ++unit) {                                           \
        idx grp = unit / (images * bands), n = unit / bands % images, b = unit % bands;     \
        idx p0 = b * band, rows = p - p0 < band ? p - p0 : band, cells = rows * g.width;    \
        if (sxc == 1) /* channels-last: a pixel's channels read together */                \
            DW##_fill(x + n * sxn + grp * cg, sxh, sxw, h, w, top - p0 * sh, left, sh, sw,  \
                      g, phases, cg, span);                                                 \
        else                                                                                \
            for (idx ch = 0; ch < cg; ++ch)                                                 \
                DW##_fill(x + n * sxn + (grp * cg + ch) * sxc, sxh, sxw, h, w,              \
                          top - p0 * sh, left, sh, sw, g, phases + ch * span, 1, 0);        \
        const T *taps = weight + grp * kg * cg * count;                                     \
        for (idx k0 = 0; k0 < kg; ) {                                                       \
            idx kbv = kg - k0 >= 8 ? 8 : kg - k0 >= 4 ? 4 : 1;                              \
            const T *kt = taps + k0 * cg * count;                                           \
            if (kbv == 8)                                                                   \
                DW##_block8(phases, kt, cg, count, offset, span, cells, stride, grids);     \
            else if (kbv == 4)                                                              \
                DW##_block4(phases, kt, cg, count, offset, span, cells, stride, grids);     \
            else                                                                            \
                DW##_block1(phases, kt, cg, count, offset, span, cells, stride, grids);     \
            T *dst = out + n * son + (grp * kg + k0) * sok + p0 * sop;                      \
            if (soq == 1) { /* NCHW: each channel's rows */                                 \
                for (idx kk = 0; kk < kbv; ++kk)                                            \
                    for (idx row = 0; row < rows; ++row)                                    \
                        memcpy(dst + kk * sok + row * sop, grids + kk * stride              \
                               + row * g.width, sizeof(T) * q);                             \
            } else { /* channels-last: each pixel's kbv channels together */                \
                for (idx row = 0; row < rows; ++row)                                        \
                    for (idx col = 0; col < q; ++col)                                       \
                        for (idx kk = 0; kk < kbv; ++kk)                                    \
                            dst[kk * sok + row * sop + col * soq] =                         \
                                grids[kk * stride + row * g.width + col];                   \
            }                                                                               \
            k0 += kbv;                                                                      \
        }                                                                                   \
    }                                                                                       \
}

DEFINE_GROUPED(grouped_f32, float, depthwise_f32)
DEFINE_GROUPED(grouped_f64, double, depthwise_f64)

