/* switches.c: every CNNCUDA_* switch the engine reads, in one table, parsed
 * one way (switches.h). Python-level and build-time switches are read by
 * cnncuda/switches.py and build_tools/switches.py; README's table lists all
 * three groups. */
#include "switches.h"

#include <ctype.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/gemm.h"

enum kind { BOOLEAN, CHOICE };

typedef struct switch_entry {
    const char *name;
    enum kind kind;
    size_t field;            /* offsetof(cnn_switches, ...) */
    int unset;               /* the field's value when the variable is unset or empty */
    const char *choices[4];  /* CHOICE: the accepted words, value = their index... */
    int values[4];           /* ...mapped to these */
} switch_entry;

#define FIELD(f) offsetof(cnn_switches, f)

static const switch_entry TABLE[] = {
    {.name = "CNNCUDA_FUSE", .kind = BOOLEAN, .field = FIELD(fuse), .unset = 1},
    {.name = "CNNCUDA_FUSE_DENSE", .kind = BOOLEAN, .field = FIELD(fuse_dense), .unset = 1},
    {.name = "CNNCUDA_FUSE_FLATTEN", .kind = BOOLEAN, .field = FIELD(fuse_flatten), .unset = 1},
    {.name = "CNNCUDA_FUSE_HEAD", .kind = BOOLEAN, .field = FIELD(fuse_head), .unset = 1},
    {.name = "CNNCUDA_FUSE_SOFTMAX", .kind = BOOLEAN, .field = FIELD(fuse_softmax), .unset = 1},
    {.name = "CNNCUDA_FUSE_POOL_COL2IM", .kind = BOOLEAN, .field = FIELD(fuse_pool_col2im),
     .unset = 1},
    {.name = "CNNCUDA_FUSE_GATHER_IM2COL", .kind = BOOLEAN, .field = FIELD(fuse_gather_im2col),
     .unset = 1},
    {.name = "CNNCUDA_GRAPHS", .kind = BOOLEAN, .field = FIELD(graphs), .unset = 1},
    {.name = "CNNCUDA_EARLY_LAUNCH", .kind = BOOLEAN, .field = FIELD(early_launch), .unset = 1},
    {.name = "CNNCUDA_CUDNN_ALGO", .kind = CHOICE, .field = FIELD(cudnn_algo),
     .unset = CNN_SWITCH_ALGO_MEASURED,
     .choices = {"measured", "heuristic", "nondeterministic"},
     .values = {CNN_SWITCH_ALGO_MEASURED, CNN_SWITCH_ALGO_HEURISTIC,
                CNN_SWITCH_ALGO_NONDETERMINISTIC}},
    {.name = "CNNCUDA_CUDNN_OWN_WGRAD", .kind = BOOLEAN, .field = FIELD(cudnn_own_wgrad),
     .unset = -1},
    {.name = "CNNCUDA_CUDNN_VERBOSE", .kind = BOOLEAN, .field = FIELD(cudnn_verbose), .unset = 0},
    {.name = "CNNCUDA_GEMM", .kind = CHOICE, .field = FIELD(gemm), .unset = -1,
     .choices = {"portable", "avx2", "avx512"},
     .values = {CNN_GEMM_PORTABLE, CNN_GEMM_AVX2, CNN_GEMM_AVX512}},
};

static const char *const TRUE_WORDS[] = {"1", "on", "true"};
static const char *const FALSE_WORDS[] = {"0", "off", "false"};

static int same_word(const char *a, const char *b)
{
    for (; *a && *b; ++a, ++b)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
    return *a == *b;
}

/* The value of `e` for the text `v` (set and not empty); -2 if refused. */
static int parse(const switch_entry *e, const char *v)
{
    if (e->kind == BOOLEAN) {
        for (size_t i = 0; i < 3; ++i) {
            if (same_word(v, TRUE_WORDS[i])) return 1;
            if (same_word(v, FALSE_WORDS[i])) return 0;
        }
        return -2;
    }
    for (size_t i = 0; i < 4 && e->choices[i]; ++i)
        if (same_word(v, e->choices[i])) return e->values[i];
    return -2;
}

static cnn_status refuse(const switch_entry *e, const char *v)
{
    if (e->kind == BOOLEAN)
        return cnn_set_error(CNN_ERR_VALUE, "%s: expected 1, 0, on, off, true or false, got '%s'",
                             e->name, v);
    char accepted[96] = "";
    for (size_t i = 0; i < 4 && e->choices[i]; ++i) {
        if (i) strncat(accepted, i + 1 < 4 && e->choices[i + 1] ? ", " : " or ",
                       sizeof accepted - strlen(accepted) - 1);
        strncat(accepted, "'", sizeof accepted - strlen(accepted) - 1);
        strncat(accepted, e->choices[i], sizeof accepted - strlen(accepted) - 1);
        strncat(accepted, "'", sizeof accepted - strlen(accepted) - 1);
    }
    return cnn_set_error(CNN_ERR_VALUE, "%s: expected %s, got '%s'", e->name, accepted, v);
}

cnn_status cnn_switches_read(cnn_switches *out)
{
    cnn_switches s;
    for (size_t i = 0; i < sizeof TABLE / sizeof TABLE[0]; ++i) {
        const switch_entry *e = &TABLE[i];
        const char *v = getenv(e->name);
        int value = e->unset;
        if (v && *v) {
            value = parse(e, v);
            if (value == -2) return refuse(e, v);
        }
        *(int *)((char *)&s + e->field) = value;
    }
    *out = s;
    return CNN_OK;
}

int cnn_switches_count(void)
{
    return (int)(sizeof TABLE / sizeof TABLE[0]);
}

const char *cnn_switches_name(int i)
{
    return i >= 0 && i < cnn_switches_count() ? TABLE[i].name : NULL;
}

int cnn_switches_value(const cnn_switches *s, int i)
{
    return *(const int *)((const char *)s + TABLE[i].field);
}
