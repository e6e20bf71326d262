/* spec_layers.c: the keys of the layer kinds beyond the first eight
 * (cnncuda/engine.py's dicts): activations' parameters, PReLU, the
 * augmentation layers, the shape and image layers, and the layers a layer
 * reads (graphs). net_spec.c's parse_layer calls them (spec_dict.h). */
#include "spec_dict.h"

#include <limits.h>
#include <math.h>
#include <string.h>

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
int spec_parse_augment(PyObject *d, int i, cnn_layer_spec *s)
{
    static const char *const modes[] = {"horizontal", "vertical", "horizontal_and_vertical"};
    static const char *const fills[] = {"reflect", "constant", "nearest", "wrap"};
    static const char *const interps[] = {"bilinear", "nearest"};
    PyObject *v = PyDict_GetItemString(d, "mode");
    s->flip_mode = v ? spec_name_index(v, modes, 3) + 1 : 3;
    if (s->flip_mode < 1) {
        PyErr_Format(PyExc_ValueError,
                     "layers[%d]['mode']: expected 'horizontal', 'vertical' or "
                     "'horizontal_and_vertical', got %R",
                     i, v);
        return -1;
    }
    v = PyDict_GetItemString(d, "fill_mode");
    s->fill_mode = v ? spec_name_index(v, fills, 4) : CNN_FILL_REFLECT;
    if (s->fill_mode < 0) {
        PyErr_Format(PyExc_ValueError,
                     "layers[%d]['fill_mode']: expected 'reflect', 'constant', 'nearest' or "
                     "'wrap', got %R",
                     i, v);
        return -1;
    }
    v = PyDict_GetItemString(d, "interpolation");
    s->interpolation = v ? spec_name_index(v, interps, 2) : CNN_INTERP_BILINEAR;
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
        spec_dict_float(d, "fill_value", 0.0, &fill_value, where) < 0 ||
        spec_dict_int(d, "same_zoom", 0, &same_zoom, i) < 0 ||
        spec_dict_pair(d, "size", 1, 1, &s->kh, &s->kw, i) < 0)
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
int spec_parse_act_parameters(PyObject *d, int i, cnn_layer_spec *s)
{
    char where[32];
    snprintf(where, sizeof where, "layers[%d]", i);
    const double alpha0 = s->activation == CNN_ACT_ELU ? 1.0
                          : s->activation == CNN_ACT_LEAKY_RELU ? 0.2 : 0.0;
    double alpha, threshold, max_value = INFINITY;
    if (spec_dict_float(d, "alpha", alpha0, &alpha, where) < 0 ||
        spec_dict_float(d, "threshold", 0.0, &threshold, where) < 0)
        return -1;
    PyObject *cap = PyDict_GetItemString(d, "max_value");
    if (cap && cap != Py_None && spec_dict_float(d, "max_value", 0.0, &max_value, where) < 0) return -1;
    s->alpha = (float)alpha;
    s->threshold = (float)threshold;
    s->max_value = (float)max_value;
    return 0;
}

/* A PReLU's 'shared_axes': None, absent, or a list of Keras's axes (1 to 3:
 * height, width, channels; 1 of a (N, F) input) into the bit set of
 * cnn_layer_spec (the core checks them against the input's rank). */
int spec_parse_shared_axes(PyObject *d, int i, cnn_layer_spec *s)
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
        if (spec_c_int(PySequence_Fast_GET_ITEM(seq, k), &axis) != 0 || axis < 1 || axis > 3)
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
            ok = e && PyLong_Check(e) && spec_c_int(e, &pad[2 * k + m]) == 0;
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
        ok = e && PyLong_Check(e) && spec_c_int(e, &dims[k]) == 0;
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
size_t spec_rescaling_values(PyObject *d)
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
        if (spec_dict_float(d, "scale", 1.0, &sv, where) < 0 ||
            spec_dict_float(d, "offset", 0.0, &ov, where) < 0)
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
int spec_parse_shape_layer(PyObject *d, int i, int kind, cnn_layer_spec *s, value_pool *pool)
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
        s->upsample_bilinear = interpolation ? spec_name_index(interpolation, interpolations, 2) : 0;
        if (s->upsample_bilinear < 0) {
            PyErr_Format(PyExc_ValueError,
                         "layers[%d]['interpolation']: expected 'nearest' or 'bilinear', got %R",
                         i, interpolation);
            return -1;
        }
        return spec_dict_pair(d, "size", 2, 2, &s->kh, &s->kw, i);
    }
    case CNN_LAYER_SPATIAL_DROPOUT: {
        double rate;
        if (spec_dict_float(d, "rate", 0.0, &rate, where) < 0) return -1;
        s->rate = (float)rate;
        return 0;
    }
    }
    PyErr_Format(PyExc_SystemError, "layers[%d]: kind %d is not a shape layer", i, kind);
    return -1;
}

/* The layers of several inputs, whose kinds are numbered apart (cnn.h). */
int spec_merge_kind(PyObject *kind)
{
    if (!kind || !PyUnicode_Check(kind)) return -1;
    if (PyUnicode_CompareWithASCIIString(kind, "add") == 0) return CNN_LAYER_ADD;
    if (PyUnicode_CompareWithASCIIString(kind, "concatenate") == 0) return CNN_LAYER_CONCAT;
    return -1;
}

/* dict['inputs']: a list of 1 to CNN_MAX_INPUTS layer indices (-1 the
 * network's input), or absent or None: the layer before (n_inputs 0). The
 * Net checks the indices against the layer's place. */
int spec_parse_inputs(PyObject *d, int i, cnn_layer_spec *s)
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
        int r = PyLong_Check(item) ? spec_c_int(item, &s->inputs[k]) : -1;
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

/* An input of a model of several inputs (CNN_LAYER_INPUT_SLICE): 'offset',
 * its first value in a sample of the packed input, and 'shape', its
 * (height, width, channels) or (features,). The Net checks that they fit. */
int spec_parse_input_slice(PyObject *d, int i, cnn_layer_spec *s)
{
    if (spec_dict_int(d, "offset", 0, &s->input_offset, i) < 0) return -1;
    return dict_target(d, s, i);
}
