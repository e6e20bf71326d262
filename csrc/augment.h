/* augment.h: the augmentation layers' descriptor and the per-sample draws
 * and geometry every engine computes with these same inline functions (the
 * cpu and omp kernels in csrc/cpu/random_*.c, the cuda ones in
 * cuda/random_*.cu; the NumPy reference writes them out again), as
 * docs/semantics.md "Augmentation layers" says.
 *
 * The random stream is dropout's: the layer's key (cnn_rng_key(seed, 2 i +
 * 1), seed the layer's own or else the Net's), keyed again by the number of
 * the training forward (*forward, the Net's CNN_COUNT_MASK counter, read
 * when the op runs, so a recorded step draws anew each replay); sample
 * row0 + i of the whole batch takes uniform(key_t, 2 (row0 + i)) and
 * uniform(key_t, 2 (row0 + i) + 1).
 *
 * Float arithmetic here is written one rounding per operation (CNN_FMUL,
 * CNN_FADD, CNN_FSUB: __fmul_rn ... on the device, where nvcc would
 * otherwise contract a product and a sum into one fused multiply-add), so
 * host and device give the same bits. Included by cnn.h. */
#ifndef CNN_AUGMENT_H
#define CNN_AUGMENT_H

#include <math.h>
#include <stdint.h>

#if defined(__CUDA_ARCH__)
#define CNN_FMUL(a, b) __fmul_rn((a), (b))
#define CNN_FADD(a, b) __fadd_rn((a), (b))
#define CNN_FSUB(a, b) __fsub_rn((a), (b))
#else
#define CNN_FMUL(a, b) ((float)(a) * (float)(b))
#define CNN_FADD(a, b) ((float)(a) + (float)(b))
#define CNN_FSUB(a, b) ((float)(a) - (float)(b))
#endif

/* fill_mode, Keras's names: where an affine transform reads outside the image */
typedef enum cnn_fill_mode {
    CNN_FILL_REFLECT = 0,  /* d c b a | a b c d | d c b a */
    CNN_FILL_CONSTANT = 1, /* fill_value */
    CNN_FILL_NEAREST = 2,  /* a a a a | a b c d | d d d d */
    CNN_FILL_WRAP = 3      /* a b c d | a b c d | a b c d */
} cnn_fill_mode;

typedef enum cnn_interpolation { CNN_INTERP_BILINEAR = 0, CNN_INTERP_NEAREST = 1 } cnn_interpolation;

/* which affine transform random_affine draws */
typedef enum cnn_affine_kind {
    CNN_AFFINE_ROTATION = 0,
    CNN_AFFINE_ZOOM = 1,
    CNN_AFFINE_TRANSLATION = 2
} cnn_affine_kind;

/* An augmentation of x (n, c, h, w) into y (n, c, oh, ow). */
typedef struct cnn_aug_desc {
    int n, c, h, w;
    int oh, ow;         /* random_crop: the crop; h, w otherwise */
    int flip_h, flip_v; /* random_flip: left-right, top-bottom */
    int affine;         /* random_affine: cnn_affine_kind */
    /* the draws' ranges, v = u (hi - lo) + lo in float32: [0] the height's
     * (rotation: degrees; zoom: 1 + Keras's factors; translation: fractions
     * of the height; contrast: the contrast factor), [1] the width's */
    float lo[2], hi[2];
    int same_zoom;      /* zoom without width_factor: the width's zoom is the height's */
    int fill, interp;   /* cnn_fill_mode, cnn_interpolation */
    float fill_value;
    float vmin, vmax;   /* random_contrast: Keras's value_range, the output's clip */
    uint64_t key;       /* the layer's key, cnn_rng_key(seed, 2 i + 1) */
} cnn_aug_desc;

/* Draw d (0 or 1) of sample `row` (its number in the whole batch) under the
 * training forward's key. */
static inline CNN_HD float cnn_aug_draw(uint64_t key_t, int64_t row, int d)
{
    return cnn_uniform(key_t, 2 * (uint64_t)row + (uint64_t)d);
}

/* A draw d mapped onto [lo[d], hi[d]) (jax's uniform: u (hi - lo) + lo). */
static inline CNN_HD float cnn_aug_value(const cnn_aug_desc *a, uint64_t key_t, int64_t row, int d)
{
    return CNN_FADD(CNN_FMUL(cnn_aug_draw(key_t, row, d), CNN_FSUB(a->hi[d], a->lo[d])), a->lo[d]);
}

/* The affine transform of sample `row`, Keras's 8-number form without its
 * projective part: output pixel (row r, column s) reads the input at row
 * m[4] r + m[3] s + m[5] and column m[1] r + m[0] s + m[2] (cnn_aug_source):
 *   rotation by theta (degrees v, radians v * (float)(pi / 180)), about
 *     cx = 0.5 (w - 1), cy = 0.5 (h - 1):
 *     m = [cos, -sin, (cx - cx cos) - cy (-sin), sin, cos, (cy - cx sin) - cy cos],
 *     cos and sin of the float32 angle in double, rounded to float32;
 *   zoom (zy, zx): m = [zx, 0, ((w - 1) / 2)(1 - zx), 0, zy, ((h - 1) / 2)(1 - zy)];
 *   translation (ty h, tx w): m = [1, 0, -tx w, 0, 1, -ty h]. */
static inline CNN_HD void cnn_aug_matrix(const cnn_aug_desc *a, uint64_t key_t, int64_t row,
                                         float m[6])
{
    const float fw = (float)a->w, fh = (float)a->h;
    if (a->affine == CNN_AFFINE_ROTATION) {
        const float rad = CNN_FMUL(cnn_aug_value(a, key_t, row, 0), (float)(3.14159265358979323846 / 180.0));
        const float co = (float)cos((double)rad), si = (float)sin((double)rad);
        const float cx = CNN_FMUL(0.5f, CNN_FSUB(fw, 1.0f)), cy = CNN_FMUL(0.5f, CNN_FSUB(fh, 1.0f));
        m[0] = co;
        m[1] = -si;
        m[2] = CNN_FSUB(CNN_FSUB(cx, CNN_FMUL(cx, co)), CNN_FMUL(cy, -si));
        m[3] = si;
        m[4] = co;
        m[5] = CNN_FSUB(CNN_FSUB(cy, CNN_FMUL(cx, si)), CNN_FMUL(cy, co));
    } else if (a->affine == CNN_AFFINE_ZOOM) {
        const float zy = cnn_aug_value(a, key_t, row, 0);
        const float zx = a->same_zoom ? zy : cnn_aug_value(a, key_t, row, 1);
        m[0] = zx;
        m[1] = 0.0f;
        m[2] = CNN_FMUL(CNN_FSUB(fw, 1.0f) / 2.0f, CNN_FSUB(1.0f, zx));
        m[3] = 0.0f;
        m[4] = zy;
        m[5] = CNN_FMUL(CNN_FSUB(fh, 1.0f) / 2.0f, CNN_FSUB(1.0f, zy));
    } else {
        const float ty = CNN_FMUL(cnn_aug_value(a, key_t, row, 0), fh);
        const float tx = CNN_FMUL(cnn_aug_value(a, key_t, row, 1), fw);
        m[0] = 1.0f;
        m[1] = 0.0f;
        m[2] = -tx;
        m[3] = 0.0f;
        m[4] = 1.0f;
        m[5] = -ty;
    }
}

/* Where output pixel (r, s) reads: *sy the input row, *sx the column, in
 * float32, each as jax's affine_transform sums it (its einsum over (r, s,
 * channel)): (m[4] r + m[3] s) + m[5], (m[1] r + m[0] s) + m[2]. */
static inline CNN_HD void cnn_aug_source(const float m[6], int r, int s, float *sy, float *sx)
{
    const float fr = (float)r, fs = (float)s;
    *sy = CNN_FADD(CNN_FADD(CNN_FMUL(fr, m[4]), CNN_FMUL(fs, m[3])), m[5]);
    *sx = CNN_FADD(CNN_FADD(CNN_FMUL(fr, m[1]), CNN_FMUL(fs, m[0])), m[2]);
}

/* An index outside [0, size) as fill_mode maps it (jax's index fixers):
 * constant leaves it (the caller reads fill_value there). */
static inline CNN_HD int64_t cnn_aug_fix(int64_t i, int64_t size, int fill)
{
    if (i >= 0 && i < size) return i;
    switch (fill) {
    case CNN_FILL_REFLECT: {
        const int64_t period = 2 * size;
        int64_t k = i % period;
        if (k < 0) k += period;
        return k < size ? k : period - 1 - k;
    }
    case CNN_FILL_NEAREST: return i < 0 ? 0 : size - 1;
    case CNN_FILL_WRAP: {
        int64_t k = i % size;
        return k < 0 ? k + size : k;
    }
    default: return i;
    }
}

/* Input pixel (i, j) of plane p (h, w) under fill_mode, fill_value outside
 * the image for constant. */
static inline CNN_HD float cnn_aug_pixel(const cnn_aug_desc *a, const float *p, int64_t i, int64_t j)
{
    i = cnn_aug_fix(i, a->h, a->fill);
    j = cnn_aug_fix(j, a->w, a->fill);
    if (i < 0 || i >= a->h || j < 0 || j >= a->w) return a->fill_value;
    return p[i * a->w + j];
}

/* Plane p (h, w) read at (sy, sx) (jax's map_coordinates, order 0 or 1):
 * nearest rounds half away from zero; bilinear adds the four neighbours'
 * w_row w_col v in the order (floor, floor), (floor, +1), (+1, floor),
 * (+1, +1), each weight product rounded once. */
static inline CNN_HD float cnn_aug_sample(const cnn_aug_desc *a, const float *p, float sy, float sx)
{
    if (a->interp == CNN_INTERP_NEAREST)
        return cnn_aug_pixel(a, p, (int64_t)roundf(sy), (int64_t)roundf(sx));
    const float fy = floorf(sy), fx = floorf(sx);
    const float wy1 = CNN_FSUB(sy, fy), wx1 = CNN_FSUB(sx, fx);
    const float wy0 = CNN_FSUB(1.0f, wy1), wx0 = CNN_FSUB(1.0f, wx1);
    const int64_t y0 = (int64_t)fy, x0 = (int64_t)fx;
    float acc = CNN_FMUL(CNN_FMUL(wy0, wx0), cnn_aug_pixel(a, p, y0, x0));
    acc = CNN_FADD(acc, CNN_FMUL(CNN_FMUL(wy0, wx1), cnn_aug_pixel(a, p, y0, x0 + 1)));
    acc = CNN_FADD(acc, CNN_FMUL(CNN_FMUL(wy1, wx0), cnn_aug_pixel(a, p, y0 + 1, x0)));
    acc = CNN_FADD(acc, CNN_FMUL(CNN_FMUL(wy1, wx1), cnn_aug_pixel(a, p, y0 + 1, x0 + 1)));
    return acc;
}

/* random_crop's offsets of sample `row`: training, uniform offsets
 * (int)(u (h - oh + 1)) (at most h - oh; likewise columns); inference, the
 * centre ((h - oh) / 2, (w - ow) / 2). */
static inline CNN_HD void cnn_aug_crop_offsets(const cnn_aug_desc *a, int training, uint64_t key_t,
                                               int64_t row, int *oy, int *ox)
{
    if (!training) {
        *oy = (a->h - a->oh) / 2;
        *ox = (a->w - a->ow) / 2;
        return;
    }
    int y = (int)CNN_FMUL(cnn_aug_draw(key_t, row, 0), (float)(a->h - a->oh + 1));
    int x = (int)CNN_FMUL(cnn_aug_draw(key_t, row, 1), (float)(a->w - a->ow + 1));
    *oy = y > a->h - a->oh ? a->h - a->oh : y;
    *ox = x > a->w - a->ow ? a->w - a->ow : x;
}

/* The checks every engine's augmentation entry makes first (host code). */
static inline cnn_status cnn_aug_check(const char *what, const cnn_aug_desc *a, int64_t row0)
{
    if (a->n < 0 || a->c < 1 || a->h < 1 || a->w < 1 || a->oh < 1 || a->ow < 1 ||
        a->oh > a->h || a->ow > a->w)
        return cnn_set_error(CNN_ERR_VALUE, "%s: bad shape (%d, %d, %d, %d) -> (%d, %d)", what,
                             a->n, a->c, a->h, a->w, a->oh, a->ow);
    if (row0 < 0)
        return cnn_set_error(CNN_ERR_VALUE, "%s: row0 %lld is negative", what, (long long)row0);
    if (a->fill < CNN_FILL_REFLECT || a->fill > CNN_FILL_WRAP ||
        (a->interp != CNN_INTERP_BILINEAR && a->interp != CNN_INTERP_NEAREST))
        return cnn_set_error(CNN_ERR_VALUE, "%s: fill mode %d or interpolation %d unknown", what,
                             a->fill, a->interp);
    return CNN_OK;
}

#endif
