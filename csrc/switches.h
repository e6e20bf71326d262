/* switches.h: the engine's environment switches (CNNCUDA_*), read in one
 * place (switches.c), strictly, at the moment a Net or a context is made.
 *
 * A boolean switch takes 1/0/on/off/true/false (any case); an empty or unset
 * variable means its default. Anything else is CNN_ERR_VALUE with a message
 * naming the variable, what it accepts and what it was given. README's table
 * of switches lists the same names.
 */
#ifndef CNN_SWITCHES_H
#define CNN_SWITCHES_H

#include "cnn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cnn_switches {
    /* fusions: each gives the bits of the steps it replaces, except
     * fuse_softmax (the same loss, the gradient equal up to rounding) */
    int fuse;               /* CNNCUDA_FUSE (on): the ReLU fusions; off also
                               turns fuse_dense off */
    int fuse_dense;         /* CNNCUDA_FUSE_DENSE (on) */
    int fuse_flatten;       /* CNNCUDA_FUSE_FLATTEN (on) */
    int fuse_head;          /* CNNCUDA_FUSE_HEAD (on) */
    int fuse_softmax;       /* CNNCUDA_FUSE_SOFTMAX (on) */
    int fuse_pool_col2im;   /* CNNCUDA_FUSE_POOL_COL2IM (on) */
    int fuse_gather_im2col; /* CNNCUDA_FUSE_GATHER_IM2COL (on) */
    /* GPU engines */
    int graphs;             /* CNNCUDA_GRAPHS (on): a training step recorded
                               once and replayed */
    int early_launch;       /* CNNCUDA_EARLY_LAUNCH (on) */
    int cudnn_algo;         /* CNNCUDA_CUDNN_ALGO: measured (default),
                               heuristic, nondeterministic: CNN_SWITCH_ALGO_* */
    int cudnn_own_wgrad;    /* CNNCUDA_CUDNN_OWN_WGRAD: -1 unset, 0 or 1 */
    int cudnn_verbose;      /* CNNCUDA_CUDNN_VERBOSE (off) */
    /* CPU engines */
    int gemm;               /* CNNCUDA_GEMM: -1 unset (the CPU's best),
                               CNN_GEMM_PORTABLE, _AVX2 or _AVX512 */
} cnn_switches;

enum { CNN_SWITCH_ALGO_MEASURED = 0, CNN_SWITCH_ALGO_HEURISTIC = 1,
       CNN_SWITCH_ALGO_NONDETERMINISTIC = 2 };

/* Every switch from the environment as it is now. */
cnn_status cnn_switches_read(cnn_switches *out);

/* The table's names, for the binding and its tests: i in [0, count). */
int cnn_switches_count(void);
const char *cnn_switches_name(int i);
/* The value of the i-th switch in s (i in [0, count)). */
int cnn_switches_value(const cnn_switches *s, int i);

#ifdef __cplusplus
}
#endif

#endif
