/* spec_dict.h: reading the Net(...) arguments' dicts (spec_dict.c) and the
 * parsers of the layer kinds beyond the first eight (spec_layers.c), for
 * net_spec.c. Each returns -1 with a Python error set that names the layer
 * and the key, or 0. */
#ifndef CNN_PY_SPEC_DICT_H
#define CNN_PY_SPEC_DICT_H

#include "net_object.h"

/* spec_dict.c */
int spec_c_int(PyObject *v, int *out); /* 0, -1 not an int, -2 out of range (no error set) */
void spec_int_range_error(int layer, const char *key, PyObject *v);
int spec_dict_int(PyObject *d, const char *key, int deflt, int *out, int layer);
int spec_dict_float(PyObject *d, const char *key, double deflt, double *out, const char *where);
int spec_dict_pair(PyObject *d, const char *key, int deflt0, int deflt1, int *a, int *b,
                   int layer);
/* The index of the str v in names[count], or -1 (no error set). */
int spec_name_index(PyObject *v, const char *const *names, int count);

/* spec_layers.c */
/* Where the per-channel values go: [at, end) of the spec block's tail. */
typedef struct value_pool {
    float *at, *end;
} value_pool;
int spec_parse_augment(PyObject *d, int i, cnn_layer_spec *s);
int spec_parse_act_parameters(PyObject *d, int i, cnn_layer_spec *s);
int spec_parse_shared_axes(PyObject *d, int i, cnn_layer_spec *s);
/* The floats a rescaling layer's per-channel values take (0: none). */
size_t spec_rescaling_values(PyObject *d);
int spec_parse_shape_layer(PyObject *d, int i, int kind, cnn_layer_spec *s, value_pool *pool);
/* CNN_LAYER_ADD or CNN_LAYER_CONCAT for 'add' or 'concatenate', else -1. */
int spec_merge_kind(PyObject *kind);
int spec_parse_inputs(PyObject *d, int i, cnn_layer_spec *s);
/* an input_slice layer's 'offset' and 'shape' (the input's, NHWC or (features,)) */
int spec_parse_input_slice(PyObject *d, int i, cnn_layer_spec *s);

#endif
