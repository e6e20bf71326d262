/* net_spec.c: Net(...)'s layers, input_shape, loss and optimizer arguments
 * checked and turned into a cnn_net_spec (net_object.h). The keys of a layer
 * dict are cnncuda/engine.py's; every error names the layer and the key. */
#include "net_object.h"

#include <limits.h>
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

static const char *const layer_kinds[] = {"conv2d", "maxpool", "avgpool", "flatten",
                                          "dense", "activation", "dropout", "batchnorm"};
static const char *const activations[] = {"linear", "relu", "sigmoid", "tanh", "softmax"};
static const char *const losses[] = {"sparse_categorical_crossentropy",
                                     "categorical_crossentropy", "binary_crossentropy"};
static const char *const optimizers[] = CNN_OPT_NAMES;

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

static int parse_layer(PyObject *d, int i, cnn_layer_spec *s)
{
    if (!PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError, "layers[%d]: expected a dict, got %.100s", i,
                     Py_TYPE(d)->tp_name);
        return -1;
    }
    PyObject *kind = PyDict_GetItemString(d, "kind");
    s->kind = name_index(kind, layer_kinds, 8);
    if (s->kind < 0) s->kind = merge_kind(kind);
    if (s->kind < 0) {
        PyErr_Format(PyExc_ValueError,
                     "layers[%d]['kind']: expected one of conv2d, maxpool, avgpool, flatten, "
                     "dense, activation, dropout, batchnorm, add, concatenate, got %R",
                     i, kind ? kind : Py_None);
        return -1;
    }
    if (parse_inputs(d, i, s) < 0) return -1;
    int units, use_bias;
    double rate, momentum, epsilon;
    if (dict_int(d, "units", 0, &units, i) < 0 || dict_int(d, "use_bias", 1, &use_bias, i) < 0)
        return -1;
    char where[32];
    snprintf(where, sizeof where, "layers[%d]", i);
    if (dict_float(d, "rate", 0.0, &rate, where) < 0 ||
        dict_float(d, "momentum", 0.99, &momentum, where) < 0 ||
        dict_float(d, "epsilon", 1e-3, &epsilon, where) < 0)
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
        s->activation = name_index(act, activations, 5);
        if (s->activation < 0) {
            PyErr_Format(PyExc_ValueError,
                         "layers[%d]['activation']: expected one of linear, relu, sigmoid, tanh, "
                         "softmax, got %R",
                         i, act ? act : Py_None);
            return -1;
        }
    }
    s->units = units;
    s->use_bias = use_bias != 0;
    s->rate = (float)rate;
    s->momentum = (float)momentum;
    s->epsilon = (float)epsilon;
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
    cnn_layer_spec *ls = PyMem_Calloc((size_t)n_layers, sizeof *ls);
    if (!ls) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n_layers; i++) {
        if (parse_layer(PyList_GET_ITEM(layers, i), (int)i, &ls[i]) < 0) {
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
