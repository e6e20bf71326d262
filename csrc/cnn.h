/* cnn.h: the public C API of the cnncuda core.
 *
 * Status codes and the last-error message, the op descriptors, the counter
 * based RNG, the backend table every engine fills in (backend_table.h), and
 * the Sequential Net. The Net (csrc/net/), the Python binding and the tests
 * reach kernels only through a cnn_backend table; registry.c is the only
 * file that knows which tables were compiled in.
 *
 * Layouts inside the core: images are NCHW, dense activations (N, F).
 * Conv kernels are stored (F, C, KH, KW); dense kernels (IN, OUT) as Keras,
 * except that a dense layer right after a Flatten of images keeps its rows in
 * NCHW feature order (the Flatten is then a no-op). The Net converts to and
 * from Keras layouts (NHWC images, conv kernels (KH, KW, C, F), those dense
 * kernels' NHWC rows) at its edges only.
 */
#ifndef CNN_H
#define CNN_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ status */

typedef enum cnn_status {
    CNN_OK = 0,
    CNN_ERR_VALUE = 1,       /* bad argument: becomes ValueError */
    CNN_ERR_MEMORY = 2,      /* allocation failed: MemoryError */
    CNN_ERR_DEVICE = 3,      /* device or library fault: cnncuda.CudaError */
    CNN_ERR_UNAVAILABLE = 4, /* engine not compiled in or not usable here */
    CNN_ERR_INTERNAL = 5,    /* a bug in cnncuda: RuntimeError */
    CNN_ERR_COMM = 6         /* a data-parallel peer failed, left or went silent:
                                cnncuda.CommError */
} cnn_status;

/* Records a message for the calling thread and returns `status`. */
cnn_status cnn_set_error(cnn_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* The message recorded by the last failing call on this thread. */
const char *cnn_last_error(void);

#define CNN_TRY(expr)                          \
    do {                                       \
        cnn_status cnn_try_s_ = (expr);        \
        if (cnn_try_s_ != CNN_OK) return cnn_try_s_; \
    } while (0)

/* --------------------------------------------------------- the user's arrays
 * Samples come from Python as the user holds them: fit, evaluate and predict
 * convert them to float32 and check them on the engine's side of the call,
 * chunk by chunk (the GPU engines in several host threads, overlapping the
 * copies to the device), instead of converting the whole array first. */

/* The element types the core converts itself; the binding casts any other
 * type to float32 first (integers and bool are exact there or rounded as
 * NumPy rounds them). float64 -> float32 rounds to nearest even, as NumPy's
 * cast does, so both paths give the same bits. */
typedef enum cnn_dtype { CNN_DTYPE_F32 = 0, CNN_DTYPE_F64 = 1, CNN_DTYPE_U8 = 2 } cnn_dtype;

/* A C-contiguous host array of samples in the user's layout ((n, h, w, c)
 * images or (n, features) rows). */
typedef struct cnn_host_array {
    const void *data;
    cnn_dtype dtype;
    const char *arg; /* the argument errors name: "x", "validation_data[0]" */
    size_t index0;   /* the flat index of data[0] in the user's array, for errors */
} cnn_host_array;

/* dst[i] = (float)a[first + i] for i < count (flat indices). Returns the
 * flat index of the first value that is NaN or infinite, or that becomes
 * infinite in float32 (1e300 in float64), or -1; dst is then written up to
 * that value at least. Thread-safe (csrc/host_convert.c). */
int64_t cnn_to_float32(float *dst, const cnn_host_array *a, size_t first, size_t count);
/* Bytes per element of a dtype. */
size_t cnn_dtype_bytes(cnn_dtype dtype);
/* Records "<arg>: expected finite values, got NaN at flat index i" (or
 * "infinity", or "1e+300 (infinity in float32)") and returns CNN_ERR_VALUE. */
cnn_status cnn_refuse_value(const cnn_host_array *a, size_t index);

/* ---------------------------------------------------------------- the RNG
 * Counter based: a value depends only on (key, counter), so every engine and
 * the NumPy reference draw the same numbers in any order. mix64 is the
 * splitmix64 finalizer; a uniform float keeps the top 24 bits. */

#if defined(__CUDACC__)
#define CNN_HD __host__ __device__
#else
#define CNN_HD
#endif

static inline CNN_HD uint64_t cnn_mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* The key of stream `stream` under `seed` (streams: see net.c). */
static inline CNN_HD uint64_t cnn_rng_key(uint64_t seed, uint64_t stream)
{
    return cnn_mix64(seed ^ cnn_mix64(stream));
}
/* Uniform in [0, 1), a multiple of 2^-24. */
static inline CNN_HD float cnn_uniform(uint64_t key, uint64_t counter)
{
    return (float)(cnn_mix64(key ^ cnn_mix64(counter)) >> 40) * (1.0f / 16777216.0f);
}

/* ----------------------------------------------------------- descriptors */

typedef enum cnn_activation {
    CNN_ACT_LINEAR = 0,
    CNN_ACT_RELU = 1,
    CNN_ACT_SIGMOID = 2,
    CNN_ACT_TANH = 3,
    CNN_ACT_SOFTMAX = 4, /* over the last axis of a (N, F) tensor */
    /* Keras 3's other activations, elementwise (csrc/activation_math.h has
     * each formula): from here on the engines' elementwise_forward and
     * elementwise_backward run them, never fused */
    CNN_ACT_ELU = 5,          /* alpha */
    CNN_ACT_SELU = 6,
    CNN_ACT_GELU = 7,         /* the erf form (Keras's approximate=False) */
    CNN_ACT_SWISH = 8,        /* silu */
    CNN_ACT_SOFTPLUS = 9,
    CNN_ACT_SOFTSIGN = 10,
    CNN_ACT_HARD_SIGMOID = 11, /* relu6(x + 3) / 6 */
    CNN_ACT_LEAKY_RELU = 12,  /* alpha: the negative slope */
    CNN_ACT_RELU6 = 13,
    CNN_ACT_EXPONENTIAL = 14,
    CNN_ACT_MISH = 15,
    CNN_ACT_RELU_GENERAL = 16, /* Keras's relu(x, negative_slope alpha, max_value, threshold) */
    CNN_ACT_KINDS = 17
} cnn_activation;
#define CNN_ACT_NAMES                                                                          \
    {"linear", "relu", "sigmoid", "tanh", "softmax", "elu", "selu", "gelu", "swish",         \
     "softplus", "softsign", "hard_sigmoid", "leaky_relu", "relu6", "exponential", "mish",   \
     "relu_general"}

/* An elementwise activation (CNN_ACT_ELU on) and its parameters. */
typedef struct cnn_act_desc {
    int act;
    float alpha;     /* elu's alpha; leaky_relu's and relu_general's negative slope */
    float max_value; /* relu_general: the cap (INFINITY: none) */
    float threshold; /* relu_general: values at or below it are "negative" */
} cnn_act_desc;

/* PReLU over x (n, c, h, w) (a (n, c) tensor: h = w = 1) with a learned
 * alpha of (ac, ah, aw), each the size of its axis or 1 where the axis is
 * shared (Keras's shared_axes): y = x where x > 0, else alpha x. */
typedef struct cnn_prelu_desc {
    int n, c, h, w;
    int ac, ah, aw;
} cnn_prelu_desc;

/* Convolution of x (n, c, h, w) with w (f, c, kh, kw) into y (n, f, oh, ow).
 * Input row i of output row r is r*sh - pad_top + i (likewise columns);
 * positions outside the image read as zero. */
typedef struct cnn_conv_desc {
    int n, c, h, w;
    int f, kh, kw;
    int sh, sw;
    int pad_top, pad_left;
    int oh, ow;
} cnn_conv_desc;

/* Whether convolution d reads only inside its input: no padding, and its
 * last window ends inside the image ('valid' convolutions), so that every
 * element of its column matrix is an element of x. */
static inline int cnn_conv_reads_inside(const cnn_conv_desc *d)
{
    return d->pad_top == 0 && d->pad_left == 0 &&
           (int64_t)(d->oh - 1) * d->sh + d->kh <= d->h &&
           (int64_t)(d->ow - 1) * d->sw + d->kw <= d->w;
}

/* Bilinear upsampling by an integer factor s along an axis of `size`
 * pixels (Keras's UpSampling2D(interpolation='bilinear'): half-pixel
 * centres, the edges clamped): output pixel o reads input pixels i0 and i1
 * with weights 1 - f and f. In float32, each operation rounded (no product
 * is added to), so host and device give the same bits. */
static inline CNN_HD void cnn_bilinear_source(int o, int s, int size, int *i0, int *i1, float *f)
{
    float src = ((float)o + 0.5f) / (float)s - 0.5f;
    if (src < 0.0f) src = 0.0f;
    if (src > (float)(size - 1)) src = (float)(size - 1);
    *i0 = (int)src;
    *i1 = *i0 + 1 < size ? *i0 + 1 : size - 1;
    *f = src - (float)*i0;
}

typedef enum cnn_pool_mode { CNN_POOL_MAX = 0, CNN_POOL_AVG = 1 } cnn_pool_mode;

/* Pooling of x (n, c, h, w) into y (n, c, oh, ow); windows are clipped to the
 * image: max ignores padding, average divides by the in-image count. */
typedef struct cnn_pool_desc {
    int mode;
    int n, c, h, w;
    int ph, pw;
    int sh, sw;
    int pad_top, pad_left;
    int oh, ow;
} cnn_pool_desc;

/* Batch normalization of x (n, c, spatial) per channel c. */
typedef struct cnn_bn_desc {
    int n, c, spatial;
    float momentum, epsilon;
} cnn_bn_desc;

typedef enum cnn_loss_kind {
    CNN_LOSS_SPARSE_CE = 0,      /* labels: int32 (n,) in [0, k) */
    CNN_LOSS_CATEGORICAL_CE = 1, /* targets: float (n, k) */
    CNN_LOSS_BINARY_CE = 2,      /* targets: float (n, k) in [0, 1] */
    /* Keras 3's regression losses, targets float (n, k); the mean over k of
     * an elementwise term (csrc/regression_math.h), the engines'
     * regression_loss_forward_backward */
    CNN_LOSS_MSE = 3,
    CNN_LOSS_MAE = 4,
    CNN_LOSS_HUBER = 5, /* cnn_loss_desc.delta */
    CNN_LOSS_MSLE = 6,
    CNN_LOSS_LOG_COSH = 7,
    CNN_LOSS_MAPE = 8,
    CNN_LOSS_KINDS = 9
} cnn_loss_kind;

/* The loss names, in cnn_loss_kind's order. */
#define CNN_LOSS_NAMES                                                                         \
    {"sparse_categorical_crossentropy", "categorical_crossentropy", "binary_crossentropy",     \
     "mean_squared_error", "mean_absolute_error", "huber", "mean_squared_logarithmic_error",   \
     "log_cosh", "mean_absolute_percentage_error"}

/* A regression loss (its op is regression_loss_forward_backward) */
#define CNN_LOSS_IS_REGRESSION(kind) ((kind) >= CNN_LOSS_MSE && (kind) < CNN_LOSS_KINDS)

typedef struct cnn_loss_desc {
    int kind;
    int from_logits; /* the cross-entropies */
    int n, k;
    float delta;     /* huber: finite, > 0 */
    int positions;   /* rows per sample (0 or 1: one): an output of several
                        positions (Keras's loss along the last axis); a
                        sample's loss and correct count added to the sums are
                        the means over its rows (the ops divide the sums of
                        their n rows by it), the gradient's scale_n counts rows */
    int weighted;    /* the binary CE and the regression losses, one position:
                        each target row holds k + 1 floats, the last the
                        sample's weight w (Keras's sample_weight): its loss and
                        gradient times w, its correct count unweighted */
} cnn_loss_desc;

/* dense_loss_head: the most units it takes, and its workspace for a batch
 * of n rows of k units (two doubles and k floats per row). */
#define CNN_HEAD_MAX_OUT 64
#define CNN_HEAD_WS_BYTES(n, k) (16 * (size_t)(n) + 4 * (size_t)(n) * (size_t)(k))

/* Probabilities are clipped to [CNN_PROB_EPS, 1 - CNN_PROB_EPS], as Keras. */
#define CNN_PROB_EPS 1e-7f

/* The precision of a Net's products (make_net's precision; one place,
 * csrc/py/net_type.c, parses the names CNN_PRECISION_NAMES): strict float32,
 * or on the GPU engines tensor cores with the operands rounded to TF32,
 * bfloat16 or float16 and float32 sums. Storage is float32 in every one. */
typedef enum cnn_precision {
    CNN_PRECISION_FLOAT32 = 0,
    CNN_PRECISION_TF32 = 1,
    CNN_PRECISION_BF16 = 2,
    CNN_PRECISION_FP16 = 3,
    CNN_PRECISIONS = 4
} cnn_precision;
#define CNN_PRECISION_NAMES {"float32", "tf32", "bf16", "fp16"}

/* Keras 3's optimizers; CNN_OPT_NAMES lists their names in this order. */
typedef enum cnn_optimizer_kind {
    CNN_OPT_ADAM = 0,
    CNN_OPT_SGD = 1,
    CNN_OPT_RMSPROP = 2,
    CNN_OPT_ADAGRAD = 3,
    CNN_OPT_ADADELTA = 4,
    CNN_OPT_ADAMAX = 5,
    CNN_OPT_NADAM = 6,
    CNN_OPT_ADAMW = 7,
    CNN_OPT_KINDS = 8
} cnn_optimizer_kind;
#define CNN_OPT_NAMES {"adam", "sgd", "rmsprop", "adagrad", "adadelta", "adamax", "nadam", "adamw"}

typedef struct cnn_optimizer_desc {
    int kind;
    float lr;
    float beta_1, beta_2, epsilon;   /* Adam, Adamax, Nadam, AdamW; epsilon all but SGD */
    float momentum;                  /* SGD, RMSprop */
    int nesterov;                    /* SGD */
    float rho;                       /* RMSprop, Adadelta */
    int centered;                    /* RMSprop */
    float initial_accumulator_value; /* Adagrad */
    float weight_decay;              /* AdamW */
} cnn_optimizer_desc;

/* The optimizer's hyperparameters as a step reads them: CNN_HYPERS floats
 * in backend memory (GPU memory on a GPU engine), so that a recorded step
 * reads the values of the time it replays, and cnn_net_set_optimizer can
 * change them between steps. */
enum {
    CNN_HYPER_LR = 0,
    CNN_HYPER_BETA_1 = 1,   /* Adam */
    CNN_HYPER_BETA_2 = 2,   /* Adam */
    CNN_HYPER_EPSILON = 3,  /* Adam */
    CNN_HYPER_MOMENTUM = 4, /* SGD, RMSprop */
    CNN_HYPER_NESTEROV = 5, /* SGD: 0 or 1 */
    CNN_HYPER_RHO = 6,      /* RMSprop, Adadelta */
    CNN_HYPER_WEIGHT_DECAY = 7, /* AdamW */
    CNN_HYPER_OPTIMIZER = 8, /* the entries above: the optimizer's (cnn_net_set_optimizer) */
    /* Dynamic loss scaling (a Net made with spec.loss_scale > 0; Keras's
     * LossScaleOptimizer), in the same engine memory so that every
     * optimizer reads the skip flag and a recorded step carries it all: */
    CNN_HYPER_SKIP = 8,         /* 1: this step's gradients are not all finite, every
                                   optimizer leaves everything as it is (0 without scaling) */
    CNN_HYPER_LOSS_SCALE = 9,   /* S: the loss's gradient is multiplied by it */
    CNN_HYPER_SCALE_GOOD = 10,  /* finite steps since S last changed (an integer) */
    CNN_HYPER_SCALE_GROWTH = 11, /* S doubles after this many finite steps */
    CNN_HYPERS = 12
};

/* b^t for t >= 0 by repeated squaring: multiplications only, so host and
 * device give the same bits (no library pow, no fused multiply-add). */
static inline CNN_HD double cnn_pow_int(double b, int64_t t)
{
    double r = 1.0;
    while (t > 0) {
        if (t & 1) r *= b;
        b *= b;
        t >>= 1;
    }
    return r;
}
/* Adam's step size at step t (from 1), Keras's form, in double then float:
 * lr sqrt(1 - beta_2^t) / (1 - beta_1^t). Every engine computes it here. */
static inline CNN_HD float cnn_adam_lr_t(float lr, float beta_1, float beta_2, int64_t t)
{
    const double c2 = 1.0 - cnn_pow_int((double)beta_2, t);
    const double c1 = 1.0 - cnn_pow_int((double)beta_1, t);
    return (float)((double)lr * sqrt(c2) / c1);
}
/* Adamax's step size at step t (from 1), in double then float:
 * lr / (1 - beta_1^t) (Keras divides lr m by (1 - beta_1^t)(u + epsilon)). */
static inline CNN_HD float cnn_adamax_lr_t(float lr, float beta_1, int64_t t)
{
    return (float)((double)lr / (1.0 - cnn_pow_int((double)beta_1, t)));
}
/* Nadam's coefficients at step t (from 1), Keras 3's form (nadam.py), in
 * double then float: u_i = beta_1 (1 - 0.5 0.96^i), U_t = u_1 ... u_t (Keras
 * keeps U_t as the variable u_product, multiplied on at every step; here it
 * is the product itself, from t: the factors (1 - 0.5 0.96^i) are 1 in
 * double from i = 1000 on, so at most 1000 of them are multiplied);
 *   c[0] = u_{t+1} / (1 - U_t u_{t+1})   (m's coefficient in m_hat)
 *   c[1] = (1 - u_t) / (1 - U_t)         (g's coefficient in m_hat)
 *   c[2] = 1 - beta_2^t                  (v_hat = v / c[2]).
 * Multiplying by 0.5 is exact, so a fused multiply-add gives the same bits. */
static inline CNN_HD void cnn_nadam_coefficients(float beta_1, float beta_2, int64_t t,
                                                 float c[3])
{
    const double b1 = (double)beta_1;
    double d = 1.0, prod = 1.0; /* 0.96^i, the product of (1 - 0.5 0.96^i) */
    for (int64_t i = 1; i <= t && i <= 1000; ++i) {
        d *= 0.96;
        prod *= 1.0 - 0.5 * d;
    }
    const double u_t = b1 * (1.0 - 0.5 * d);
    const double u_next = b1 * (1.0 - 0.5 * (d * 0.96));
    const double u_prod = cnn_pow_int(b1, t) * prod;
    c[0] = (float)(u_next / (1.0 - u_prod * u_next));
    c[1] = (float)((1.0 - u_t) / (1.0 - u_prod));
    c[2] = (float)(1.0 - cnn_pow_int((double)beta_2, t));
}

/* The Net's counters, in backend memory (so that a GPU step reads them
 * there and can be recorded once and replayed): a training step reads them
 * instead of taking them as arguments. */
enum {
    CNN_COUNT_POSITION = 0, /* train_range: the next row of the order */
    CNN_COUNT_FORWARDS = 1, /* training forwards begun */
    CNN_COUNT_MASK = 2,     /* dropout: the number of the last training forward */
    CNN_COUNT_STEPS = 3,    /* optimizer steps taken */
    CNN_COUNTERS = 4
};

/* Dynamic loss scaling after an optimizer step (the loss_scale_update op of
 * every engine; Keras's LossScaleOptimizer): a step whose gradients were not
 * all finite (hyper[CNN_HYPER_SKIP]) was skipped: the scale halves, the good
 * steps restart and the step is not counted; else one more good step, and at
 * the growth count the scale doubles and the count restarts. Halving and
 * doubling are exact in float. */
static inline CNN_HD void cnn_loss_scale_next(float *hyper, int64_t *counters)
{
    if (hyper[CNN_HYPER_SKIP] != 0.0f) {
        hyper[CNN_HYPER_LOSS_SCALE] *= 0.5f;
        hyper[CNN_HYPER_SCALE_GOOD] = 0.0f;
        counters[CNN_COUNT_STEPS] -= 1;
    } else if (hyper[CNN_HYPER_SCALE_GOOD] + 1.0f >= hyper[CNN_HYPER_SCALE_GROWTH]) {
        hyper[CNN_HYPER_LOSS_SCALE] *= 2.0f;
        hyper[CNN_HYPER_SCALE_GOOD] = 0.0f;
    } else {
        hyper[CNN_HYPER_SCALE_GOOD] += 1.0f;
    }
    hyper[CNN_HYPER_SKIP] = 0.0f;
}

/* The augmentation layers' descriptor and per-sample geometry. */
#include "augment.h"

/* The backend table every engine fills in: the op signatures, the core ops
 * and the fused ops. */
#include "backend_table.h"

/* ------------------------------------------------------------- registry */

/* The backend named `name` ("cpu", ...), or NULL with the error recorded:
 * CNN_ERR_VALUE for an unknown name, CNN_ERR_UNAVAILABLE for a known engine
 * that was not compiled in or cannot run on this machine. */
const cnn_backend *cnn_backend_find(const char *name, cnn_status *status);
/* A space-separated list of what was compiled in, for build_info(). */
const char *cnn_build_features(void);
/* What setup.py found (toolkit, libraries, architectures), one line. */
const char *cnn_build_summary(void);
/* Number of CUDA devices visible now (0 when CUDA is not compiled in). */
int cnn_cuda_device_count(void);
/* The name of CUDA device `index` into buf; 0 on success, -1 otherwise. */
int cnn_cuda_device_name(int index, char *buf, int len);
/* The compute capability of CUDA device `index` (e.g. 7.5, 9.0) into *major
 * and *minor; 0 on success, -1 (both 0) otherwise. */
int cnn_cuda_device_capability(int index, int *major, int *minor);
/* The GPU libraries' versions, 0 where absent: v[0] the CUDA driver and
 * v[1] the runtime (1000*major + 10*minor), v[2] cuDNN (e.g. 91400), v[3]
 * cuBLAS (10000*major + 100*minor + patch). */
void cnn_gpu_library_versions(long v[4]);
/* Free and total bytes of the current GPU's memory; 0 on success, -1 where
 * there is no GPU. */
int cnn_cuda_memory(size_t *free_bytes, size_t *total_bytes);

/* ------------------------------------------------------------------ Net */

typedef enum cnn_layer_kind {
    CNN_LAYER_CONV2D = 0,
    CNN_LAYER_MAXPOOL = 1,
    CNN_LAYER_AVGPOOL = 2,
    CNN_LAYER_FLATTEN = 3,
    CNN_LAYER_DENSE = 4,
    CNN_LAYER_ACTIVATION = 5,
    CNN_LAYER_DROPOUT = 6,
    CNN_LAYER_BATCHNORM = 7,
    CNN_LAYER_PRELU = 8, /* a learned alpha (cnn_prelu_desc) */
    CNN_LAYER_RESCALING = 10,       /* y = x scale + offset */
    CNN_LAYER_RESHAPE = 11,         /* to target_*, in Keras's (NHWC) element order */
    CNN_LAYER_ZERO_PADDING = 12,    /* images padded with pad[4] rows and columns of zeros */
    CNN_LAYER_CROPPING = 13,        /* images cropped by pad[4] rows and columns */
    CNN_LAYER_UPSAMPLING = 14,      /* by kh x kw: nearest or bilinear */
    CNN_LAYER_SPATIAL_DROPOUT = 15, /* dropout of whole channels per sample */
    /* the augmentation layers (augment.h): active in training forwards
     * only, before any layer with weights */
    CNN_LAYER_RANDOM_FLIP = 16,
    CNN_LAYER_RANDOM_ROTATION = 17,
    CNN_LAYER_RANDOM_ZOOM = 18,
    CNN_LAYER_RANDOM_TRANSLATION = 19,
    CNN_LAYER_RANDOM_CONTRAST = 20,
    CNN_LAYER_RANDOM_CROP = 21,
    /* layers of several inputs (cnn_layer_spec.inputs): the sum of inputs of
     * one shape, and the inputs joined along the channels (the last axis in
     * Keras's layout: C of NCHW images, the features of (N, F) rows) */
    CNN_LAYER_ADD = 24,
    CNN_LAYER_CONCAT = 25,
    /* one input of a model of several inputs: its values, at input_offset
     * of each sample of the network's (N, features) input (the inputs
     * packed side by side, each in Keras's NHWC order), as an (N, target_c)
     * row or a target_h x target_w x target_c image (NCHW on the engines).
     * It reads the network's input (-1) alone, comes before every other
     * layer, and passes no gradient back (csrc/net/graph.c) */
    CNN_LAYER_INPUT_SLICE = 26
} cnn_layer_kind;
/* The first and last of the shape and image layers (csrc/net/shapes.c). */
#define CNN_LAYER_SHAPE_FIRST CNN_LAYER_RESCALING
#define CNN_LAYER_SHAPE_LAST CNN_LAYER_SPATIAL_DROPOUT

/* Whether a layer kind is an augmentation layer. */
static inline int cnn_layer_is_augment(int kind)
{
    return kind >= CNN_LAYER_RANDOM_FLIP && kind <= CNN_LAYER_RANDOM_CROP;
}

/* The most inputs one layer reads (CNN_LAYER_ADD, CNN_LAYER_CONCAT). */
#define CNN_MAX_INPUTS 8

typedef struct cnn_layer_spec {
    int kind;
    int units;        /* conv filters or dense units */
    int kh, kw;       /* conv kernel, pool size or upsampling size */
    int sh, sw;       /* strides */
    int same;         /* padding: 1 'same', 0 'valid' */
    int use_bias;
    int activation;   /* CNN_LAYER_ACTIVATION */
    float rate;       /* dropout, spatial dropout */
    float momentum;   /* batchnorm */
    float epsilon;    /* batchnorm */
    int frozen;       /* conv, dense, batchnorm: Keras's trainable=False: the optimizer
                         skips the layer's weights (they keep their values and have no
                         optimizer slots); a frozen batchnorm normalizes with its moving
                         statistics in training too (Keras 3's inference mode) */
    int inference;    /* batchnorm: inference mode in training too (Keras's training=False
                         on its call), its gamma and beta trained (unless frozen) */
    float kernel_l1, kernel_l2; /* conv, dense: the kernel's regularizer (Keras's L1L2) */
    float bias_l1, bias_l2;     /* conv, dense: the bias's */
    /* augmentation layers (kh, kw: random_crop's height and width) */
    int flip_mode;          /* random_flip: 1 horizontal, 2 vertical, 3 both */
    float aug_lo[2], aug_hi[2]; /* the draws' ranges (cnn_aug_desc's lo, hi) */
    int same_zoom;          /* random_zoom without width_factor */
    int fill_mode;          /* cnn_fill_mode */
    int interpolation;      /* cnn_interpolation */
    float fill_value;
    float value_range[2];   /* random_contrast */
    int has_seed;           /* the layer's own seed, else the Net's */
    uint64_t aug_seed;
    /* CNN_LAYER_ACTIVATION from CNN_ACT_ELU on: cnn_act_desc's parameters */
    float alpha, max_value, threshold;
    /* CNN_LAYER_PRELU: bit k - 1 set where Keras's axis k shares one alpha
     * (axes 1, 2, 3: height, width, channels; of a (N, F) input, axis 1) */
    int shared_axes;
    float scale, offset; /* rescaling, unless channel_values */
    /* rescaling per channel (the input's last axis, Keras's): channels
     * scales then channels offsets, read only by cnn_net_create; NULL: the
     * scalars scale and offset */
    const float *channel_values;
    int channels;
    int pad[4];       /* zero padding, cropping: rows at the top, bottom, columns left, right */
    int target_h, target_w, target_c; /* reshape: NHWC, or (0, 0, features) */
    int upsample_bilinear; /* upsampling: 0 nearest, 1 bilinear */
    int input_offset;      /* input_slice: its first value in a sample of the input */
    /* the layers whose outputs it reads, in order (-1: the network's input);
     * n_inputs 0: the layer before it (layer i - 1, the input for layer 0),
     * as in a chain. A network whose layers read others than the one before,
     * or whose layer outputs feed several layers, is a graph: the Net runs
     * it with a gradient buffer per layer and sums the gradients of an
     * output read more than once (csrc/net/graph.c). Layers come in an order
     * where each reads only layers before it; the last is the output. */
    int n_inputs;
    int inputs[CNN_MAX_INPUTS];
} cnn_layer_spec;

/* A network of several outputs (a Keras model's): its last layer is a
 * CNN_LAYER_CONCAT of the outputs, each flat per sample, and each output
 * has a loss of its own (compile's loss list, loss_weights). Output j reads
 * input j of that concatenation: loss.k values along its last axis at
 * loss.positions positions per sample (k positions = its values per
 * sample); its targets come packed with the others' in one float32 row per
 * sample, in the outputs' order: positions labels (exact floats in [0, k))
 * for the sparse cross-entropy, else positions k targets, then the
 * sample's weight where loss.weighted (one position). The network's loss
 * is the sum of weight times each output's loss (csrc/net/loss_parts.c). */
#define CNN_MAX_OUTPUTS CNN_MAX_INPUTS
typedef struct cnn_loss_part {
    cnn_loss_desc loss; /* kind, from_logits, delta, weighted, k, positions; n ignored */
    float weight;       /* loss_weights: finite, >= 0 */
} cnn_loss_part;

typedef struct cnn_net_spec {
    int in_h, in_w, in_c; /* image input (NHWC); in_h = in_w = 0 for a (N, in_c) input */
    int max_batch;
    const cnn_layer_spec *layers;
    int n_layers;
    cnn_loss_desc loss;   /* n is ignored; k must match the last layer;
                             ignored where n_parts > 0 */
    int n_parts;          /* 0: one output (loss); else its outputs' losses */
    cnn_loss_part parts[CNN_MAX_OUTPUTS];
    cnn_optimizer_desc optimizer;
    uint64_t seed;
    int precision;        /* cnn_precision: the GPU engines' products (CNN_PRECISION_FLOAT32 strict) */
    float loss_scale;     /* > 0: dynamic loss scaling from this scale (LossScaleOptimizer); 0: none */
    int loss_scale_growth_steps; /* the scale doubles after this many finite steps in a row */
    int device;           /* GPU engines: the CUDA device index (0 the first) */
} cnn_net_spec;

typedef struct cnn_net cnn_net;

cnn_status cnn_net_create(const cnn_backend *backend, int num_threads,
                          const cnn_net_spec *spec, cnn_net **out);
void cnn_net_destroy(cnn_net *net);

/* A network of several outputs (cnn_net_spec.n_parts): the number of its
 * losses (0 for one output), the floats of a sample's packed target row
 * (any network: its target elements), and the per-output sums of the last
 * train_batch, compute_gradients, evaluate, evaluate_validation or
 * read_sums: out[2 j] output j's loss sum (unweighted), out[2 j + 1] its
 * correct count. The loss_sum those calls give is then the weighted sum of
 * the outputs' loss sums plus the regularizers' penalty. */
int cnn_net_part_count(const cnn_net *net);
long cnn_net_target_width(const cnn_net *net);
void cnn_net_part_sums(const cnn_net *net, double *out);

/* Output shape of the last layer: rank 4 (n, h, w, c) in Keras order or rank 2. */
void cnn_net_output_shape(const cnn_net *net, int *rank, int dims[3]);
int cnn_net_max_batch(const cnn_net *net);
long cnn_net_step_count(const cnn_net *net);

/* The steps a training step of fit runs, planned once when the Net was
 * created: the forward (its loss last) when backward is 0, else the
 * backward. Each step is one call of the engine over one layer or, fused,
 * several; its name is "<layer kind>_<layer index>.<what it runs>", e.g.
 * "conv2d_0.forward+relu" or "dense_4.backward_filter". The name is NULL
 * for an i outside [0, cnn_net_plan_length). */
int cnn_net_plan_length(const cnn_net *net, int backward);
const char *cnn_net_plan_step_name(const cnn_net *net, int backward, int i);

/* The time of each planned step of a training step on the batch x_host of n
 * samples (targets as for train_batch, below), averaged over `steps` steps
 * after one untimed: seconds[k] and names[k] (a plan's step name, or
 * "optimizer" for the update), k < *count <= cap. The steps train: profile
 * a copy of a network whose weights matter (csrc/net/profile.c). */
cnn_status cnn_net_profile(cnn_net *net, int n, const float *x_host, const int32_t *labels_host,
                           const float *targets_host, int steps, double *seconds,
                           const char **names, int cap, int *count);

/* x_host: (n, in_h, in_w, in_c) float32. Targets: labels_host int32 (n) for
 * sparse losses, targets_host float32 (n, k) otherwise (several outputs:
 * their packed rows, (n, cnn_net_target_width)). */
cnn_status cnn_net_train_batch(cnn_net *net, int n, const float *x_host,
                               const int32_t *labels_host, const float *targets_host,
                               float *loss_sum, float *correct);
/* Any n: runs in chunks of max_batch. Sums over all samples (each chunk's
 * float32 sums added in double, in order). x is converted and checked as
 * set_data's (a value that is not finite: CNN_ERR_VALUE naming x->arg). */
cnn_status cnn_net_evaluate(cnn_net *net, long n, const cnn_host_array *x,
                            const int32_t *labels_host, const float *targets_host,
                            double *loss_sum, double *correct);
/* Any n: y_host (n, output shape in Keras order). */
cnn_status cnn_net_predict(cnn_net *net, long n, const cnn_host_array *x, float *y_host);
/* Validation data resident on the engine for a fit call: uploaded once
 * (converted and checked as set_data's), evaluated by evaluate_validation
 * with the bits evaluate gives for the same arrays; n = 0 drops it. */
cnn_status cnn_net_set_validation(cnn_net *net, long n, const cnn_host_array *x,
                                  const int32_t *labels_host, const float *targets_host);
cnn_status cnn_net_evaluate_validation(cnn_net *net, double *loss_sum, double *correct);

/* Training data resident on the engine, for fit: */
/* uploads n samples once (x in the user's layout and type, converted to
 * float32 and checked finite: CNN_ERR_VALUE naming x->arg and the first
 * flat index otherwise; with labels_host or targets_host); replaces what an
 * earlier call uploaded. Allocates. */
cnn_status cnn_net_set_data(cnn_net *net, long n, const cnn_host_array *x,
                            const int32_t *labels_host, const float *targets_host);
/* uploads an epoch's sample order: order_host (n), a permutation or any list
 * of indices into the resident data. */
cnn_status cnn_net_set_order(cnn_net *net, const int32_t *order_host);
/* trains on order[start, start + count) in steps of `batch` samples (the last
 * may be shorter): gathers each batch on the engine, runs forward, loss,
 * backward and the optimizer, and adds loss and correct counts to the
 * engine's running sums. No host synchronisation. */
cnn_status cnn_net_train_range(cnn_net *net, long start, long count, int batch);
/* reads the running sums (a synchronisation point); resets them when reset. */
cnn_status cnn_net_read_sums(cnn_net *net, int reset, double *loss_sum, double *correct);
/* Seconds the engine spent on the last train_range, measured on its own
 * clock (CUDA events on the GPU engines; waits for it to finish); -1 where
 * the engine has no clock. */
cnn_status cnn_net_range_seconds(cnn_net *net, double *seconds);
/* Bytes of engine memory the network holds (buffers, workspaces, resident
 * training and validation data): device memory on the GPU engines. */
size_t cnn_net_memory_bytes(const cnn_net *net);
/* The Net's layers (those of its spec). */
int cnn_net_layer_count(const cnn_net *net);
/* Engine memory that layer i (of cnn_net_layer_count) holds, at max_batch:
 * *activation its output (0 for a flatten that is its input's buffer), max
 * pooling's argmax, batchnorm's saved statistics and rescaling's scales and
 * offsets; *workspace a
 * convolution's workspace. -1 for an i out of range, else 0. */
int cnn_net_layer_bytes(const cnn_net *net, int i, size_t *activation, size_t *workspace);

/* Pieces of a step, for tests and custom loops: */
/* forward of n <= max_batch samples; training uses batch statistics, dropout
 * and advances the step's RNG. y_host may be NULL. */
cnn_status cnn_net_forward(cnn_net *net, int n, const float *x_host, int training,
                           float *y_host);
/* backward of the last training forward (of n samples) from dy_host (Keras
 * layout of the output): fills the gradient block; dx_host (input layout)
 * may be NULL. */
cnn_status cnn_net_backward(cnn_net *net, int n, const float *dy_host, float *dx_host);
/* forward (training), loss and backward, without the optimizer step. */
cnn_status cnn_net_compute_gradients(cnn_net *net, int n, const float *x_host,
                                     const int32_t *labels_host,
                                     const float *targets_host, float *loss_sum,
                                     float *correct);
/* one optimizer step with the gradient block as it stands. */
cnn_status cnn_net_apply_gradients(cnn_net *net);

/* Dynamic loss scaling (a Net made with spec.loss_scale > 0): whether it
 * is on; its state (the scale of the next step, the finite steps since it
 * last changed, the growth count), read from the engine; set (a network
 * taking over another's: scale finite > 0, 0 <= good < growth <= 2^24). */
int cnn_net_loss_scaling(const cnn_net *net);
cnn_status cnn_net_loss_scale(cnn_net *net, float *scale, long *good_steps, long *growth_steps);
cnn_status cnn_net_set_loss_scale(cnn_net *net, float scale, long good_steps, long growth_steps);

/* Weights in Keras order and layout: per conv/dense layer kernel then bias,
 * per batchnorm layer gamma, beta, moving_mean, moving_variance; per PReLU
 * layer alpha. */
typedef enum cnn_weight_role {
    CNN_WEIGHT_KERNEL = 0,
    CNN_WEIGHT_BIAS = 1,
    CNN_WEIGHT_GAMMA = 2,
    CNN_WEIGHT_BETA = 3,
    CNN_WEIGHT_MOVING_MEAN = 4,
    CNN_WEIGHT_MOVING_VAR = 5,
    CNN_WEIGHT_ALPHA = 6 /* PReLU */
} cnn_weight_role;

typedef struct cnn_weight_info {
    int layer;     /* index into spec.layers */
    int role;      /* cnn_weight_role */
    int trainable;
    int rank;
    int dims[4];   /* Keras shape */
    size_t count;
    float l1, l2;  /* its regularizer: l1 sum|w| + l2 sum w^2 added to the loss */
} cnn_weight_info;

int cnn_net_weight_count(const cnn_net *net);
const cnn_weight_info *cnn_net_weight(const cnn_net *net, int i);
cnn_status cnn_net_get_weight(cnn_net *net, int i, float *host);
cnn_status cnn_net_set_weight(cnn_net *net, int i, const float *host);
/* The gradient of a trainable weight after the last backward. */
cnn_status cnn_net_get_gradient(cnn_net *net, int i, float *host);

/* Optimizer state, to save it or carry it to another Net: per trainable
 * weight i (Keras layout) slot s, in the order of Keras's variables: Adam's,
 * AdamW's and Nadam's momentum (m, 0) and velocity (v, 1), SGD's momentum
 * (its velocity; none for momentum 0), RMSprop's velocity, then its momentum
 * (only if built with momentum > 0) and average_gradient (only if centered),
 * Adagrad's accumulator, Adadelta's accumulated_grad and
 * accumulated_delta_var, Adamax's momentum and norm; and the counters that
 * key the bias corrections (optimizer steps) and dropout (training
 * forwards). */
int cnn_net_optimizer_slots(const cnn_net *net);
cnn_status cnn_net_get_slot(cnn_net *net, int i, int slot, float *host);
cnn_status cnn_net_set_slot(cnn_net *net, int i, int slot, const float *host);
long cnn_net_train_forward_count(const cnn_net *net);
cnn_status cnn_net_set_counters(cnn_net *net, long steps, long train_forwards);

/* The optimizer's hyperparameters from the next step on (Keras reads them
 * at every step): o's kind must be the net's; a value out of range, SGD's or
 * RMSprop's momentum for a net built without it (no buffer), or another
 * RMSprop centered, is refused and changes nothing. Reaches a recorded GPU step too (cnn.h: CNN_HYPER_*). */
cnn_status cnn_net_set_optimizer(cnn_net *net, const cnn_optimizer_desc *o);

/* Data parallel (comm.h): makes the net replica comm->rank of comm->world
 * (NULL: alone again). Every replica's parameters, state and optimizer
 * moments become rank 0's (a collective call: every rank makes it). From
 * then on train_range's batch is the whole batch of all replicas: each takes
 * its share of every batch and the gradients are summed over the group. The
 * caller keeps comm alive while the net uses it. */
struct cnn_comm;
cnn_status cnn_net_set_comm(cnn_net *net, struct cnn_comm *comm);
/* The running sums of train_range summed over the group, in place (a
 * collective call); read_sums then reads the group's totals. */
cnn_status cnn_net_reduce_sums(cnn_net *net);
/* Makes the net's device current on the calling thread (GPU engines). */
cnn_status cnn_net_activate(cnn_net *net);

#ifdef __cplusplus
}
#endif
#endif /* CNN_H */
