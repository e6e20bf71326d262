/* net_spec.c: Net(...)'s layers, input_shape, loss and optimizer arguments
 * checked and turned into a cnn_net_spec (net_object.h). The keys of a layer
 * dict are cnncuda/engine.py's; every error names the layer and the key. */
#include "net_object.h"

#include <limits.h>
#include <math.h>
#include <string.h>

/* v as a C int: 0, or -1 when v is not an int (no error set), -2 when it is
 * one outside [INT_MIN, INT_MAX] (no error set): a huge Python int must be
 * refused, not cut to its low 32 bits. */
static int c_int(PyObject *v, int *out)
{
    int overflow = 0;
    long x = PyLong_AsLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    if (overflow || x < INT_MIN || x > INT_MAX) return -2;
    *out = (int)x;
    return 0;
}

static void int_range_error(int layer, const char *key, PyObject *v)
{
    PyErr_Format(PyExc_ValueError, "layers[%d]['%s']: expected an int in [%d, %d], got %R",
                 layer, key, INT_MIN, INT_MAX, v);
}

/* Reads dict[key] as an int (default when missing); -1 with an error set. */
static int dict_int(PyObject *d, const char *key, int deflt, int *out, int layer)
{
    PyObject *v = PyDict_GetItemString(d, key);
    if (!v) {
        *out = deflt;
        return 0;
    }
    if (PyBool_Check(v)) {
        *out = v == Py_True;
        return 0;
    }
    int r = c_int(v, out);
    if (r == -1) {
        PyErr_Format(PyExc_TypeError, "layers[%d]['%s']: expected an int, got %R", layer, key, v);
        return -1;
    }
    if (r == -2) {
        int_range_error(layer, key, v);
        return -1;
    }
    return 0;
}

static int dict_float(PyObject *d, const char *key, double deflt, double *out, const char *where)
{
    PyObject *v = PyDict_GetItemString(d, key);
    if (!v) {
        *out = deflt;
        return 0;
    }
    double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s['%s']: expected a number, got %R", where, key, v);
        return -1;
    }
    *out = x;
    return 0;
}

/* dict[key] as a pair of ints (an int n means (n, n)). */
static int dict_pair(PyObject *d, const char *key, int deflt0, int deflt1, int *a, int *b,
                     int layer)
{
    PyObject *v = PyDict_GetItemString(d, key);
    if (!v || v == Py_None) {
        *a = deflt0;
        *b = deflt1;
        return 0;
    }
    int r = -1;
    if (PyLong_Check(v)) {
        r = c_int(v, a);
        *b = *a;
    } else if (PySequence_Check(v) && PySequence_Size(v) == 2) {
        PyObject *x = PySequence_GetItem(v, 0), *y = PySequence_GetItem(v, 1);
        if (x && y) {
            int ra = c_int(x, a), rb = c_int(y, b);
            r = (ra == -1 || rb == -1) ? -1 : (ra == -2 || rb == -2) ? -2 : 0;
        }
        Py_XDECREF(x);
        Py_XDECREF(y);
    }
    PyErr_Clear(); /* a failed PySequence_Size or GetItem: reported below */
    if (r == 0) return 0;
    if (r == -2) {
        int_range_error(layer, key, v);
        return -1;
    }
    PyErr_Format(PyExc_TypeError, "layers[%d]['%s']: expected an int or a pair of ints, got %R",
                 layer, key, v);
    return -1;
}

static int name_index(PyObject *v, const char *const *names, int count)
{
    if (!v || !PyUnicode_Check(v)) return -1;
    for (int i = 0; i < count; i++)
        if (PyUnicode_CompareWithASCIIString(v, names[i]) == 0) return i;
    return -1;
}

static const char *const layer_kinds[] = {"conv2d",     "maxpool", "avgpool",   "flatten", "dense",
                                          "activation", "dropout", "batchnorm", "prelu"};
#define LAYER_KINDS 9
/* the shape and image layers' kinds, from CNN_LAYER_SHAPE_FIRST on */
static const char *const shape_kinds[] = {"rescaling",  "reshape",      "zero_padding2d",
                                          "cropping2d", "upsampling2d", "spatial_dropout2d"};
#define SHAPE_KINDS ((int)(sizeof shape_kinds / sizeof shape_kinds[0]))
static const char *const activations[] = CNN_ACT_NAMES;
static const char *const losses[] = {"sparse_categorical_crossentropy",
                                     "categorical_crossentropy", "binary_crossentropy"};
static const char *const optimizers[] = CNN_OPT_NAMES;

/* The augmentation layers' kinds (cnn.h: CNN_LAYER_RANDOM_FLIP + index). */
static const char *const augment_kinds[] = {"random_flip",        "random_rotation", "random_zoom",
                                            "random_translation", "random_contrast", "random_crop"};

/* dict[key] as two floats (default when missing); -1 with an error set. */
static int dict_float_pair(PyObject *d, const char *key, double deflt, float out[2], int layer)
{
    PyObject *v = PyDict_GetItemString(d, key);
    if (!v) {
        out[0] = out[1] = (float)deflt;
        return 0;
    }
    double x[2] = {0.0, 0.0};
    int ok = PySequence_Check(v) && PySequence_Size(v) == 2;
    for (int k = 0; ok && k < 2; k++) {
        PyObject *e = PySequence_GetItem(v, k);
        x[k] = e ? PyFloat_AsDouble(e) : -1.0;
        Py_XDECREF(e);
        if (!e || (x[k] == -1.0 && PyErr_Occurred())) ok = 0;
    }
    if (!ok) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "layers[%d]['%s']: expected a pair of numbers, got %R",
                     layer, key, v);
        return -1;
    }
    out[0] = (float)x[0];
    out[1] = (float)x[1];
    return 0;
}

/* An augmentation layer's keys (cnncuda/engine.py): mode, low, high,
 * same_zoom, fill_mode, interpolation, fill_value, value_range, size, seed. */
static int parse_augment(PyObject *d, int i, cnn_layer_spec *s)
{
    static const char *const modes[] = {"horizontal", "vertical", "horizontal_and_vertical"};
    static const char *const fills[] = {"reflect", "constant", "nearest", "wrap"};
    static const char *const interps[] = {"bilinear", "nearest"};
    PyObject *v = PyDict_GetItemString(d, "mode");
    s->flip_mode = v ? name_index(v, modes, 3) + 1 : 3;
    if (s->flip_mode < 1) {
        PyErr_Format(PyExc_ValueError,
                     "layers[%d]['mode']: expected 'horizontal', 'vertical' or "
                     "'horizontal_and_vertical', got %R",
                     i, v);
        return -1;
    }
    v = PyDict_GetItemString(d, "fill_mode");
    s->fill_mode = v ? name_index(v, fills, 4) : CNN_FILL_REFLECT;
    if (s->fill_mode < 0) {
        PyErr_Format(PyExc_ValueError,
                     "layers[%d]['fill_mode']: expected 'reflect', 'constant', 'nearest' or "
                     "'wrap', got %R",
                     i, v);
        return -1;
    }
    v = PyDict_GetItemString(d, "interpolation");
    s->interpolation = v ? name_index(v, interps, 2) : CNN_INTERP_BILINEAR;
    if (s->interpolation < 0) {
        PyErr_Format(PyExc_ValueError,
                     "layers[%d]['interpolation']: expected 'bilinear' or 'nearest', got %R", i,
                     v);
        return -1;
    }
    char where[32];
    snprintf(where, sizeof where, "layers[%d]", i);
    double fill_value;
    int same_zoom;
    if (dict_float_pair(d, "low", 0.0, s->aug_lo, i) < 0 ||
        dict_float_pair(d, "high", 0.0, s->aug_hi, i) < 0 ||
        dict_float_pair(d, "value_range", 0.0, s->value_range, i) < 0 ||
        dict_float(d, "fill_value", 0.0, &fill_value, where) < 0 ||
        dict_int(d, "same_zoom", 0, &same_zoom, i) < 0 ||
        dict_pair(d, "size", 1, 1, &s->kh, &s->kw, i) < 0)
        return -1;
    if (s->kind == CNN_LAYER_RANDOM_CONTRAST && !PyDict_GetItemString(d, "value_range")) {
        s->value_range[0] = 0.0f;
        s->value_range[1] = 255.0f;
    }
    s->fill_value = (float)fill_value;
    s->same_zoom = same_zoom != 0;
    v = PyDict_GetItemString(d, "seed");
    s->has_seed = v && v != Py_None;
    if (s->has_seed) {
        unsigned long long seed = PyLong_Check(v) ? PyLong_AsUnsignedLongLong(v) : 0;
        if (!PyLong_Check(v) || (seed == (unsigned long long)-1 && PyErr_Occurred())) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError,
                         "layers[%d]['seed']: expected None or an int in [0, 2**64), got %R", i,
                         v);
            return -1;
        }
        s->aug_seed = (uint64_t)seed;
    }
    return 0;
}

/* An activation's parameters (cnn.h cnn_act_desc): 'alpha' (Keras's
 * defaults: elu 1.0, leaky_relu 0.2, relu_general 0.0), 'max_value' (None
 * or absent: no cap), 'threshold' (0.0). */
static int parse_act_parameters(PyObject *d, int i, cnn_layer_spec *s)
{
    char where[32];
    snprintf(where, sizeof where, "layers[%d]", i);
    const double alpha0 = s->activation == CNN_ACT_ELU ? 1.0
                          : s->activation == CNN_ACT_LEAKY_RELU ? 0.2 : 0.0;
    double alpha, threshold, max_value = INFINITY;
    if (dict_float(d, "alpha", alpha0, &alpha, where) < 0 ||
        dict_float(d, "threshold", 0.0, &threshold, where) < 0)
        return -1;
    PyObject *cap = PyDict_GetItemString(d, "max_value");
    if (cap && cap != Py_None && dict_float(d, "max_value", 0.0, &max_value, where) < 0) return -1;
    s->alpha = (float)alpha;
    s->threshold = (float)threshold;
    s->max_value = (float)max_value;
    return 0;
}

/* A PReLU's 'shared_axes': None, absent, or a list of Keras's axes (1 to 3:
 * height, width, channels; 1 of a (N, F) input) into the bit set of
 * cnn_layer_spec (the core checks them against the input's rank). */
static int parse_shared_axes(PyObject *d, int i, cnn_layer_spec *s)
{
    s->shared_axes = 0;
    PyObject *v = PyDict_GetItemString(d, "shared_axes");
    if (!v || v == Py_None) return 0;
    PyObject *seq = PySequence_Fast(v, "");
    if (!seq) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "layers[%d]['shared_axes']: expected a list of axes, got %R",
                     i, v);
        return -1;
    }
    int bad = 0;
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(seq) && !bad; k++) {
        int axis = 0;
        if (c_int(PySequence_Fast_GET_ITEM(seq, k), &axis) != 0 || axis < 1 || axis > 3)
            bad = 1;
        else
            s->shared_axes |= 1 << (axis - 1);
    }
    Py_DECREF(seq);
    if (bad) {
        PyErr_Format(PyExc_ValueError,
                     "layers[%d]['shared_axes']: expected axes in [1, 3] (height, width, "
                     "channels), got %R",
                     i, v);
        return -1;
    }
    return 0;
}

/* dict[key] as ((top, bottom), (left, right)) of ints into pad[4]. */
static int dict_pads(PyObject *d, const char *key, int pad[4], int layer)
{
    PyObject *v = PyDict_GetItemString(d, key);
    int ok = v && PySequence_Check(v) && PySequence_Size(v) == 2;
    for (int k = 0; ok && k < 2; k++) {
        PyObject *pair = PySequence_GetItem(v, k);
        ok = pair && PySequence_Check(pair) && PySequence_Size(pair) == 2;
        for (int m = 0; ok && m < 2; m++) {
            PyObject *e = PySequence_GetItem(pair, m);
            ok = e && PyLong_Check(e) && c_int(e, &pad[2 * k + m]) == 0;
            Py_XDECREF(e);
        }
        Py_XDECREF(pair);
    }
    PyErr_Clear();
    if (ok) return 0;
    PyErr_Format(PyExc_TypeError,
                 "layers[%d]['%s']: expected ((top, bottom), (left, right)) of ints, got %R",
                 layer, key, v ? v : Py_None);
    return -1;
}

/* dict['shape'] (a reshape's target): (height, width, channels) or
 * (features,) of ints, as the engine's input_shape. */
static int dict_target(PyObject *d, cnn_layer_spec *s, int layer)
{
    PyObject *v = PyDict_GetItemString(d, "shape");
    const Py_ssize_t rank = v && PySequence_Check(v) ? PySequence_Size(v) : -1;
    int dims[3] = {0, 0, 0}, ok = rank == 1 || rank == 3;
    for (Py_ssize_t k = 0; ok && k < rank; k++) {
        PyObject *e = PySequence_GetItem(v, k);
        ok = e && PyLong_Check(e) && c_int(e, &dims[k]) == 0;
        Py_XDECREF(e);
    }
    PyErr_Clear();
    if (!ok) {
        PyErr_Format(PyExc_TypeError,
                     "layers[%d]['shape']: expected (height, width, channels) or (features,) "
                     "of ints, got %R",
                     layer, v ? v : Py_None);
        return -1;
    }
    s->target_h = rank == 3 ? dims[0] : 0;
    s->target_w = rank == 3 ? dims[1] : 0;
    s->target_c = rank == 3 ? dims[2] : dims[0];
    return 0;
}

/* The length of v when it is a sequence of values (a list, a tuple, a 1-D
 * array) rather than one number, else -1; no error is left set. */
static Py_ssize_t values_length(PyObject *v)
{
    if (!v || PyUnicode_Check(v) || PyBytes_Check(v) || !PySequence_Check(v)) return -1;
    const Py_ssize_t n = PySequence_Size(v);
    if (n < 0) PyErr_Clear();
    return n < 0 ? -1 : n;
}

/* The floats a rescaling layer dict needs besides its spec: 2 per channel
 * where its scale or offset is a sequence (net_spec_parse sizes its block
 * with it; parse_rescaling fills them). */
static size_t rescaling_values(PyObject *d)
{
    PyObject *kind = PyDict_Check(d) ? PyDict_GetItemString(d, "kind") : NULL;
    if (!kind || !PyUnicode_Check(kind) || PyUnicode_CompareWithASCIIString(kind, "rescaling"))
        return 0;
    Py_ssize_t n = values_length(PyDict_GetItemString(d, "scale"));
    const Py_ssize_t m = values_length(PyDict_GetItemString(d, "offset"));
    if (m > n) n = m;
    return n > 0 ? 2 * (size_t)n : 0;
}

/* Item k of sequence v (or v itself, a number, when k < 0) as a float into *out. */
static int value_at(PyObject *v, Py_ssize_t k, const char *key, int layer, float *out)
{
    PyObject *e = k < 0 ? (Py_INCREF(v), v) : PySequence_GetItem(v, k);
    double x = e ? PyFloat_AsDouble(e) : -1.0;
    Py_XDECREF(e);
    if (x == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "layers[%d]['%s']: expected a number or a sequence of numbers, got %R",
                     layer, key, v);
        return -1;
    }
    *out = (float)x;
    return 0;
}

/* Where the per-channel values go: [at, end) of the spec block's tail. */
typedef struct value_pool {
    float *at, *end;
} value_pool;

/* A rescaling layer's scale and offset: numbers, or per channel where
 * either is a sequence (the other repeated when it is a number), the
 * values written at *pool, which moves past them. */
static int parse_rescaling(PyObject *d, int i, cnn_layer_spec *s, value_pool *pool)
{
    PyObject *scale = PyDict_GetItemString(d, "scale"), *offset = PyDict_GetItemString(d, "offset");
    const Py_ssize_t ns = values_length(scale), no = values_length(offset);
    if (ns < 0 && no < 0) {
        char where[32];
        snprintf(where, sizeof where, "layers[%d]", i);
        double sv, ov;
        if (dict_float(d, "scale", 1.0, &sv, where) < 0 ||
            dict_float(d, "offset", 0.0, &ov, where) < 0)
            return -1;
        s->scale = (float)sv;
        s->offset = (float)ov;
        return 0;
    }
    const Py_ssize_t n = ns >= 0 ? ns : no;
    if ((ns >= 0 && no >= 0 && ns != no) || n < 1) {
        PyErr_Format(PyExc_ValueError,
                     "layers[%d]: per-channel 'scale' and 'offset' must have the same number "
                     "of values (at least one), got %zd and %zd",
                     i, ns, no);
        return -1;
    }
    if (2 * n > pool->end - pool->at) { /* a sequence whose length changed since it was sized */
        PyErr_Format(PyExc_ValueError, "layers[%d]: 'scale' or 'offset' changed length", i);
        return -1;
    }
    float *values = pool->at;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (scale ? value_at(scale, ns >= 0 ? k : -1, "scale", i, &values[k]) < 0
                  : (values[k] = 1.0f, 0))
            return -1;
        if (offset ? value_at(offset, no >= 0 ? k : -1, "offset", i, &values[n + k]) < 0
                   : (values[n + k] = 0.0f, 0))
            return -1;
    }
    pool->at += 2 * n;
    s->scale = 1.0f;
    s->offset = 0.0f;
    s->channel_values = values;
    s->channels = (int)n;
    return 0;
}

/* A shape or image layer's keys (cnncuda/engine.py); the core checks their
 * values against the layer's input (csrc/net/shapes.c). */
static int parse_shape_layer(PyObject *d, int i, int kind, cnn_layer_spec *s, value_pool *pool)
{
    char where[32];
    snprintf(where, sizeof where, "layers[%d]", i);
    s->kind = kind;
    switch (kind) {
    case CNN_LAYER_RESCALING:
        return parse_rescaling(d, i, s, pool);
    case CNN_LAYER_RESHAPE:
        return dict_target(d, s, i);
    case CNN_LAYER_ZERO_PADDING:
        return dict_pads(d, "padding", s->pad, i);
    case CNN_LAYER_CROPPING:
        return dict_pads(d, "cropping", s->pad, i);
    case CNN_LAYER_UPSAMPLING: {
        static const char *const interpolations[] = {"nearest", "bilinear"};
        PyObject *interpolation = PyDict_GetItemString(d, "interpolation");
        s->upsample_bilinear = interpolation ? name_index(interpolation, interpolations, 2) : 0;
        if (s->upsample_bilinear < 0) {
            PyErr_Format(PyExc_ValueError,
                         "layers[%d]['interpolation']: expected 'nearest' or 'bilinear', got %R",
                         i, interpolation);
            return -1;
        }
        return dict_pair(d, "size", 2, 2, &s->kh, &s->kw, i);
    }
    case CNN_LAYER_SPATIAL_DROPOUT: {
        double rate;
        if (dict_float(d, "rate", 0.0, &rate, where) < 0) return -1;
        s->rate = (float)rate;
        return 0;
    }
    }
    PyErr_Format(PyExc_SystemError, "layers[%d]: kind %d is not a shape layer", i, kind);
    return -1;
}

/* The layers of several inputs, whose kinds are numbered apart (cnn.h). */
static int merge_kind(PyObject *kind)
{
    if (!kind || !PyUnicode_Check(kind)) return -1;
    if (PyUnicode_CompareWithASCIIString(kind, "add") == 0) return CNN_LAYER_ADD;
    if (PyUnicode_CompareWithASCIIString(kind, "concatenate") == 0) return CNN_LAYER_CONCAT;
    return -1;
}

/* dict['inputs']: a list of 1 to CNN_MAX_INPUTS layer indices (-1 the
 * network's input), or absent or None: the layer before (n_inputs 0). The
 * Net checks the indices against the layer's place. */
static int parse_inputs(PyObject *d, int i, cnn_layer_spec *s)
{
    s->n_inputs = 0;
    PyObject *v = PyDict_GetItemString(d, "inputs");
    if (!v || v == Py_None) return 0;
    if (!PyList_Check(v) && !PyTuple_Check(v)) {
        PyErr_Format(PyExc_TypeError, "layers[%d]['inputs']: expected a list of layer indices, "
                     "got %R", i, v);
        return -1;
    }
    Py_ssize_t n = PySequence_Size(v);
    if (n < 1 || n > CNN_MAX_INPUTS) {
        PyErr_Format(PyExc_ValueError, "layers[%d]['inputs']: expected 1 to %d layer indices, "
                     "got %zd", i, CNN_MAX_INPUTS, n);
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *item = PySequence_GetItem(v, k);
        if (!item) return -1;
        int r = PyLong_Check(item) ? c_int(item, &s->inputs[k]) : -1;
        if (r != 0) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "layers[%d]['inputs'][%zd]: expected a layer index "
                         "(an int, -1 for the network's input), got %R", i, k, item);
            Py_DECREF(item);
            return -1;
        }
        Py_DECREF(item);
    }
    s->n_inputs = (int)n;
    return 0;
}


static int parse_layer(PyObject *d, int i, cnn_layer_spec *s, value_pool *per_channel)
{
    if (!PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError, "layers[%d]: expected a dict, got %.100s", i,
                     Py_TYPE(d)->tp_name);
        return -1;
    }
    PyObject *kind = PyDict_GetItemString(d, "kind");
    s->kind = name_index(kind, layer_kinds, LAYER_KINDS);
    if (s->kind < 0) s->kind = merge_kind(kind);
    const int augment = name_index(kind, augment_kinds, 6);
    if (augment >= 0) {
        s->kind = CNN_LAYER_RANDOM_FLIP + augment;
        return parse_inputs(d, i, s) < 0 ? -1 : parse_augment(d, i, s);
    }
    if (s->kind < 0) {
        const int shape = name_index(kind, shape_kinds, SHAPE_KINDS);
        if (shape >= 0)
            return parse_inputs(d, i, s) < 0
                       ? -1
                       : parse_shape_layer(d, i, CNN_LAYER_SHAPE_FIRST + shape, s, per_channel);
        PyErr_Format(PyExc_ValueError,
                     "layers[%d]['kind']: expected one of conv2d, maxpool, avgpool, flatten, "
                     "dense, activation, dropout, batchnorm, prelu, rescaling, reshape, "
                     "zero_padding2d, cropping2d, upsampling2d, spatial_dropout2d, add, "
                     "concatenate, random_flip, random_rotation, random_zoom, "
                     "random_translation, random_contrast, random_crop, got %R",
                     i, kind ? kind : Py_None);
        return -1;
    }
    if (parse_inputs(d, i, s) < 0) return -1;
    int units, use_bias, trainable;
    double rate, momentum, epsilon, kernel_l1, kernel_l2, bias_l1, bias_l2;
    if (dict_int(d, "units", 0, &units, i) < 0 || dict_int(d, "use_bias", 1, &use_bias, i) < 0 ||
        dict_int(d, "trainable", 1, &trainable, i) < 0)
        return -1;
    char where[32];
    snprintf(where, sizeof where, "layers[%d]", i);
    if (dict_float(d, "rate", 0.0, &rate, where) < 0 ||
        dict_float(d, "momentum", 0.99, &momentum, where) < 0 ||
        dict_float(d, "epsilon", 1e-3, &epsilon, where) < 0 ||
        dict_float(d, "kernel_l1", 0.0, &kernel_l1, where) < 0 ||
        dict_float(d, "kernel_l2", 0.0, &kernel_l2, where) < 0 ||
        dict_float(d, "bias_l1", 0.0, &bias_l1, where) < 0 ||
        dict_float(d, "bias_l2", 0.0, &bias_l2, where) < 0)
        return -1;
    int pool = s->kind == CNN_LAYER_MAXPOOL || s->kind == CNN_LAYER_AVGPOOL;
    /* a window has no default size here (Keras's layers give theirs): as the
     * reference, a conv or pool layer without one (or with None) is refused */
    if (pool || s->kind == CNN_LAYER_CONV2D) {
        PyObject *kernel = PyDict_GetItemString(d, "kernel");
        if (!kernel) {
            PyErr_Format(PyExc_ValueError, "layers[%d] (%s): missing 'kernel'", i,
                         layer_kinds[s->kind]);
            return -1;
        }
        if (kernel == Py_None) {
            PyErr_Format(PyExc_TypeError,
                         "layers[%d]['kernel']: expected an int or a pair of ints, got None", i);
            return -1;
        }
    }
    if (dict_pair(d, "kernel", 1, 1, &s->kh, &s->kw, i) < 0) return -1;
    if (dict_pair(d, "strides", pool ? s->kh : 1, pool ? s->kw : 1, &s->sh, &s->sw, i) < 0)
        return -1;
    PyObject *padding = PyDict_GetItemString(d, "padding");
    static const char *const paddings[] = {"valid", "same"};
    s->same = padding ? name_index(padding, paddings, 2) : 0;
    if (s->same < 0) {
        PyErr_Format(PyExc_ValueError, "layers[%d]['padding']: expected 'valid' or 'same', got %R",
                     i, padding);
        return -1;
    }
    s->activation = 0;
    PyObject *fused = PyDict_GetItemString(d, "activation");
    if ((s->kind == CNN_LAYER_CONV2D || s->kind == CNN_LAYER_DENSE) && fused &&
        fused != Py_None &&
        (!PyUnicode_Check(fused) || PyUnicode_CompareWithASCIIString(fused, "linear") != 0)) {
        /* not ignored: the layer would run without it */
        PyErr_Format(PyExc_ValueError,
                     "layers[%d]['activation']: a %s layer takes none (add an activation "
                     "layer after it), got %R",
                     i, layer_kinds[s->kind], fused);
        return -1;
    }
    if (s->kind == CNN_LAYER_ACTIVATION) {
        PyObject *act = PyDict_GetItemString(d, "activation");
        s->activation = name_index(act, activations, CNN_ACT_KINDS);
        if (s->activation < 0) {
            PyErr_Format(PyExc_ValueError,
                         "layers[%d]['activation']: expected one of linear, relu, sigmoid, tanh, "
                         "softmax, elu, selu, gelu, swish, softplus, softsign, hard_sigmoid, "
                         "leaky_relu, relu6, exponential, mish, relu_general, got %R",
                         i, act ? act : Py_None);
            return -1;
        }
    }
    if (parse_act_parameters(d, i, s) < 0 || parse_shared_axes(d, i, s) < 0) return -1;
    s->units = units;
    s->use_bias = use_bias != 0;
    s->rate = (float)rate;
    s->momentum = (float)momentum;
    s->epsilon = (float)epsilon;
    s->frozen = trainable == 0;
    s->kernel_l1 = (float)kernel_l1;
    s->kernel_l2 = (float)kernel_l2;
    s->bias_l1 = (float)bias_l1;
    s->bias_l2 = (float)bias_l2;
    return 0;
}

static int parse_loss(PyObject *d, cnn_loss_desc *l)
{
    if (!PyDict_Check(d)) {
        PyErr_SetString(PyExc_TypeError, "loss: expected a dict with 'kind' and 'from_logits'");
        return -1;
    }
    PyObject *kind = PyDict_GetItemString(d, "kind");
    l->kind = name_index(kind, losses, 3);
    if (l->kind < 0) {
        PyErr_Format(PyExc_ValueError,
                     "loss['kind']: expected one of sparse_categorical_crossentropy, "
                     "categorical_crossentropy, binary_crossentropy, got %R",
                     kind ? kind : Py_None);
        return -1;
    }
    PyObject *fl = PyDict_GetItemString(d, "from_logits");
    l->from_logits = fl ? PyObject_IsTrue(fl) : 0;
    return l->from_logits < 0 ? -1 : 0;
}

int net_parse_optimizer(PyObject *d, cnn_optimizer_desc *o)
{
    if (!PyDict_Check(d)) {
        PyErr_SetString(PyExc_TypeError, "optimizer: expected a dict with 'kind'");
        return -1;
    }
    PyObject *kind = PyDict_GetItemString(d, "kind");
    o->kind = name_index(kind, optimizers, CNN_OPT_KINDS);
    if (o->kind < 0) {
        PyErr_Format(PyExc_ValueError,
                     "optimizer['kind']: expected one of adam, sgd, rmsprop, adagrad, adadelta, "
                     "adamax, nadam, adamw, got %R",
                     kind ? kind : Py_None);
        return -1;
    }
    /* Keras 3's defaults: learning_rate 0.01 for SGD, else 0.001; rho 0.95
     * for Adadelta, else 0.9 (RMSprop) */
    double lr, b1, b2, eps, momentum, rho, init_acc, wd;
    if (dict_float(d, "learning_rate", o->kind == CNN_OPT_SGD ? 1e-2 : 1e-3, &lr, "optimizer") < 0 ||
        dict_float(d, "beta_1", 0.9, &b1, "optimizer") < 0 ||
        dict_float(d, "beta_2", 0.999, &b2, "optimizer") < 0 ||
        dict_float(d, "epsilon", 1e-7, &eps, "optimizer") < 0 ||
        dict_float(d, "momentum", 0.0, &momentum, "optimizer") < 0 ||
        dict_float(d, "rho", o->kind == CNN_OPT_ADADELTA ? 0.95 : 0.9, &rho, "optimizer") < 0 ||
        dict_float(d, "initial_accumulator_value", 0.1, &init_acc, "optimizer") < 0 ||
        dict_float(d, "weight_decay", o->kind == CNN_OPT_ADAMW ? 0.004 : 0.0, &wd,
                   "optimizer") < 0)
        return -1;
    PyObject *nesterov = PyDict_GetItemString(d, "nesterov");
    o->nesterov = nesterov ? PyObject_IsTrue(nesterov) : 0;
    if (o->nesterov < 0) return -1;
    PyObject *centered = PyDict_GetItemString(d, "centered");
    o->centered = centered ? PyObject_IsTrue(centered) : 0;
    if (o->centered < 0) return -1;
    o->lr = (float)lr;
    o->beta_1 = (float)b1;
    o->beta_2 = (float)b2;
    o->epsilon = (float)eps;
    o->momentum = (float)momentum;
    o->rho = (float)rho;
    o->initial_accumulator_value = (float)init_acc;
    o->weight_decay = (float)wd;
    return 0;
}

int net_spec_parse(PyObject *layers, PyObject *input_shape, PyObject *loss,
                   PyObject *optimizer, cnn_net_spec *spec, cnn_layer_spec **layer_specs,
                   long dims[3], Py_ssize_t *rank_out)
{
    *layer_specs = NULL;
    if (!PyList_Check(layers) || PyList_GET_SIZE(layers) < 1) {
        PyErr_SetString(PyExc_ValueError, "layers: expected a non-empty list of layer dicts");
        return -1;
    }
    memset(spec, 0, sizeof *spec);
    PyObject *shape = PySequence_Fast(input_shape, "input_shape: expected a tuple of ints");
    if (!shape) return -1;
    Py_ssize_t rank = PySequence_Fast_GET_SIZE(shape);
    dims[0] = dims[1] = dims[2] = 0;
    for (Py_ssize_t i = 0; i < rank && i < 3; i++) {
        dims[i] = PyLong_AsLong(PySequence_Fast_GET_ITEM(shape, i));
        if (dims[i] == -1 && PyErr_Occurred()) break;
    }
    Py_DECREF(shape);
    int too_big = dims[0] > INT_MAX || dims[1] > INT_MAX || dims[2] > INT_MAX;
    if (PyErr_Occurred() || (rank != 3 && rank != 1) || dims[0] < 1 ||
        (rank == 3 && (dims[1] < 1 || dims[2] < 1)) || too_big) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError,
                     "input_shape: expected (height, width, channels) or (features,) of "
                     "positive ints (at most %d), got %R",
                     INT_MAX, input_shape);
        return -1;
    }
    if (rank == 3) {
        spec->in_h = (int)dims[0];
        spec->in_w = (int)dims[1];
        spec->in_c = (int)dims[2];
    } else {
        spec->in_c = (int)dims[0];
    }
    Py_ssize_t n_layers = PyList_GET_SIZE(layers);
    /* the specs, then the rescaling layers' per-channel values, in one block
     * (the caller frees it with PyMem_Free) */
    size_t values = 0;
    for (Py_ssize_t i = 0; i < n_layers; i++) values += rescaling_values(PyList_GET_ITEM(layers, i));
    cnn_layer_spec *ls = PyMem_Calloc(1, (size_t)n_layers * sizeof *ls + values * sizeof(float));
    if (!ls) {
        PyErr_NoMemory();
        return -1;
    }
    value_pool pool = {(float *)(ls + n_layers), (float *)(ls + n_layers) + values};
    for (Py_ssize_t i = 0; i < n_layers; i++) {
        if (parse_layer(PyList_GET_ITEM(layers, i), (int)i, &ls[i], &pool) < 0) {
            PyMem_Free(ls);
            return -1;
        }
    }
    if (parse_loss(loss, &spec->loss) < 0 || net_parse_optimizer(optimizer, &spec->optimizer) < 0) {
        PyMem_Free(ls);
        return -1;
    }
    spec->layers = ls;
    spec->n_layers = (int)n_layers;
    *layer_specs = ls;
    *rank_out = rank;
    return 0;
}
