/* net_spec.c: Net(...)'s layers, input_shape, loss and optimizer arguments
 * checked and turned into a cnn_net_spec (net_object.h). The keys of a layer
 * dict are cnncuda/engine.py's; every error names the layer and the key. */
#include "spec_dict.h"

#include <limits.h>
#include <math.h>
#include <string.h>

static const char *const layer_kinds[] = {"conv2d",     "maxpool", "avgpool",   "flatten", "dense",
                                          "activation", "dropout", "batchnorm", "prelu"};
#define LAYER_KINDS 9
/* the shape and image layers' kinds, from CNN_LAYER_SHAPE_FIRST on */
static const char *const shape_kinds[] = {"rescaling",  "reshape",      "zero_padding2d",
                                          "cropping2d", "upsampling2d", "spatial_dropout2d"};
#define SHAPE_KINDS ((int)(sizeof shape_kinds / sizeof shape_kinds[0]))
static const char *const activations[] = CNN_ACT_NAMES;
static const char *const losses[] = CNN_LOSS_NAMES;
static const char *const optimizers[] = CNN_OPT_NAMES;

/* The augmentation layers' kinds (cnn.h: CNN_LAYER_RANDOM_FLIP + index). */
static const char *const augment_kinds[] = {"random_flip",        "random_rotation", "random_zoom",
                                            "random_translation", "random_contrast", "random_crop"};

static int parse_layer(PyObject *d, int i, cnn_layer_spec *s, value_pool *per_channel)
{
    if (!PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError, "layers[%d]: expected a dict, got %.100s", i,
                     Py_TYPE(d)->tp_name);
        return -1;
    }
    PyObject *kind = PyDict_GetItemString(d, "kind");
    s->kind = spec_name_index(kind, layer_kinds, LAYER_KINDS);
    if (s->kind < 0) s->kind = spec_merge_kind(kind);
    const int augment = spec_name_index(kind, augment_kinds, 6);
    if (augment >= 0) {
        s->kind = CNN_LAYER_RANDOM_FLIP + augment;
        return spec_parse_inputs(d, i, s) < 0 ? -1 : spec_parse_augment(d, i, s);
    }
    if (s->kind < 0 && kind && PyUnicode_Check(kind) &&
        PyUnicode_CompareWithASCIIString(kind, "input_slice") == 0) {
        s->kind = CNN_LAYER_INPUT_SLICE;
        return spec_parse_inputs(d, i, s) < 0 ? -1 : spec_parse_input_slice(d, i, s);
    }
    if (s->kind < 0) {
        const int shape = spec_name_index(kind, shape_kinds, SHAPE_KINDS);
        if (shape >= 0)
            return spec_parse_inputs(d, i, s) < 0
                       ? -1
                       : spec_parse_shape_layer(d, i, CNN_LAYER_SHAPE_FIRST + shape, s, per_channel);
        PyErr_Format(PyExc_ValueError,
                     "layers[%d]['kind']: expected one of conv2d, maxpool, avgpool, flatten, "
                     "dense, activation, dropout, batchnorm, prelu, rescaling, reshape, "
                     "zero_padding2d, cropping2d, upsampling2d, spatial_dropout2d, add, "
                     "concatenate, input_slice, random_flip, random_rotation, random_zoom, "
                     "random_translation, random_contrast, random_crop, got %R",
                     i, kind ? kind : Py_None);
        return -1;
    }
    if (spec_parse_inputs(d, i, s) < 0) return -1;
    int units, use_bias, trainable, inference;
    double rate, momentum, epsilon, kernel_l1, kernel_l2, bias_l1, bias_l2;
    if (spec_dict_int(d, "units", 0, &units, i) < 0 || spec_dict_int(d, "use_bias", 1, &use_bias, i) < 0 ||
        spec_dict_int(d, "trainable", 1, &trainable, i) < 0 ||
        spec_dict_int(d, "inference", 0, &inference, i) < 0)
        return -1;
    char where[32];
    snprintf(where, sizeof where, "layers[%d]", i);
    if (spec_dict_float(d, "rate", 0.0, &rate, where) < 0 ||
        spec_dict_float(d, "momentum", 0.99, &momentum, where) < 0 ||
        spec_dict_float(d, "epsilon", 1e-3, &epsilon, where) < 0 ||
        spec_dict_float(d, "kernel_l1", 0.0, &kernel_l1, where) < 0 ||
        spec_dict_float(d, "kernel_l2", 0.0, &kernel_l2, where) < 0 ||
        spec_dict_float(d, "bias_l1", 0.0, &bias_l1, where) < 0 ||
        spec_dict_float(d, "bias_l2", 0.0, &bias_l2, where) < 0)
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
    if (spec_dict_pair(d, "kernel", 1, 1, &s->kh, &s->kw, i) < 0) return -1;
    if (spec_dict_pair(d, "strides", pool ? s->kh : 1, pool ? s->kw : 1, &s->sh, &s->sw, i) < 0)
        return -1;
    PyObject *padding = PyDict_GetItemString(d, "padding");
    static const char *const paddings[] = {"valid", "same"};
    s->same = padding ? spec_name_index(padding, paddings, 2) : 0;
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
        s->activation = spec_name_index(act, activations, CNN_ACT_KINDS);
        if (s->activation < 0) {
            PyErr_Format(PyExc_ValueError,
                         "layers[%d]['activation']: expected one of linear, relu, sigmoid, tanh, "
                         "softmax, elu, selu, gelu, swish, softplus, softsign, hard_sigmoid, "
                         "leaky_relu, relu6, exponential, mish, relu_general, got %R",
                         i, act ? act : Py_None);
            return -1;
        }
    }
    if (spec_parse_act_parameters(d, i, s) < 0 || spec_parse_shared_axes(d, i, s) < 0) return -1;
    s->units = units;
    s->use_bias = use_bias != 0;
    s->rate = (float)rate;
    s->momentum = (float)momentum;
    s->epsilon = (float)epsilon;
    s->frozen = trainable == 0;
    s->inference = inference != 0;
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
    l->kind = spec_name_index(kind, losses, CNN_LOSS_KINDS);
    if (l->kind < 0) {
        PyErr_Format(PyExc_ValueError,
                     "loss['kind']: expected one of sparse_categorical_crossentropy, "
                     "categorical_crossentropy, binary_crossentropy, mean_squared_error, "
                     "mean_absolute_error, huber, mean_squared_logarithmic_error, log_cosh, "
                     "mean_absolute_percentage_error, got %R",
                     kind ? kind : Py_None);
        return -1;
    }
    PyObject *fl = PyDict_GetItemString(d, "from_logits");
    l->from_logits = fl ? PyObject_IsTrue(fl) : 0;
    if (l->from_logits < 0) return -1;
    PyObject *weighted = PyDict_GetItemString(d, "weighted");
    l->weighted = weighted ? PyObject_IsTrue(weighted) : 0;
    if (l->weighted < 0) return -1;
    l->delta = 1.0f;
    PyObject *delta = PyDict_GetItemString(d, "delta");
    if (delta && delta != Py_None) {
        const double v = PyFloat_AsDouble(delta);
        if (v == -1.0 && PyErr_Occurred()) return -1;
        if (!(v > 0.0 && v <= 3.4e38)) {
            PyErr_Format(PyExc_ValueError, "loss['delta']: expected a finite number > 0, got %R",
                         delta);
            return -1;
        }
        l->delta = (float)v;
    }
    return 0;
}

/* loss: one output's dict (parse_loss), or for a model of several
 * outputs {"outputs": [one dict per output, each with "classes" (the
 * output's last axis), "positions" (its rows per sample) and "weight" (its
 * loss weight, 1 by default)]} (cnn.h cnn_loss_part). */
static int parse_losses(PyObject *d, cnn_net_spec *spec)
{
    PyObject *outputs = PyDict_Check(d) ? PyDict_GetItemString(d, "outputs") : NULL;
    if (!outputs) return parse_loss(d, &spec->loss);
    if (!PyList_Check(outputs) || PyList_GET_SIZE(outputs) < 2 ||
        PyList_GET_SIZE(outputs) > CNN_MAX_OUTPUTS) {
        PyErr_Format(PyExc_ValueError,
                     "loss['outputs']: expected a list of 2 to %d loss dicts (one per output), "
                     "got %R", CNN_MAX_OUTPUTS, outputs);
        return -1;
    }
    spec->n_parts = (int)PyList_GET_SIZE(outputs);
    for (int j = 0; j < spec->n_parts; j++) {
        PyObject *item = PyList_GET_ITEM(outputs, j);
        cnn_loss_part *p = &spec->parts[j];
        if (parse_loss(item, &p->loss) < 0) return -1;
        double weight, classes, positions;
        if (spec_dict_float(item, "weight", 1.0, &weight, "loss['outputs'][j]") < 0 ||
            spec_dict_float(item, "classes", 0.0, &classes, "loss['outputs'][j]") < 0 ||
            spec_dict_float(item, "positions", 1.0, &positions, "loss['outputs'][j]") < 0)
            return -1;
        if (!(weight >= 0.0 && weight <= 3.4e38) || !(classes >= 1.0 && classes <= INT_MAX) ||
            !(positions >= 1.0 && positions <= INT_MAX)) {
            PyErr_Format(PyExc_ValueError,
                         "loss['outputs'][%d]: expected a finite weight >= 0 and classes and "
                         "positions >= 1, got %R", j, item);
            return -1;
        }
        p->weight = (float)weight;
        p->loss.k = (int)classes;
        p->loss.positions = (int)positions;
    }
    spec->loss = (cnn_loss_desc){.kind = CNN_LOSS_MSE, .delta = 1.0f}; /* the packed targets */
    return 0;
}

int net_parse_optimizer(PyObject *d, cnn_optimizer_desc *o)
{
    if (!PyDict_Check(d)) {
        PyErr_SetString(PyExc_TypeError, "optimizer: expected a dict with 'kind'");
        return -1;
    }
    PyObject *kind = PyDict_GetItemString(d, "kind");
    o->kind = spec_name_index(kind, optimizers, CNN_OPT_KINDS);
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
    if (spec_dict_float(d, "learning_rate", o->kind == CNN_OPT_SGD ? 1e-2 : 1e-3, &lr, "optimizer") < 0 ||
        spec_dict_float(d, "beta_1", 0.9, &b1, "optimizer") < 0 ||
        spec_dict_float(d, "beta_2", 0.999, &b2, "optimizer") < 0 ||
        spec_dict_float(d, "epsilon", 1e-7, &eps, "optimizer") < 0 ||
        spec_dict_float(d, "momentum", 0.0, &momentum, "optimizer") < 0 ||
        spec_dict_float(d, "rho", o->kind == CNN_OPT_ADADELTA ? 0.95 : 0.9, &rho, "optimizer") < 0 ||
        spec_dict_float(d, "initial_accumulator_value", 0.1, &init_acc, "optimizer") < 0 ||
        spec_dict_float(d, "weight_decay", o->kind == CNN_OPT_ADAMW ? 0.004 : 0.0, &wd,
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

/* The optimizer dict's dynamic loss scaling (LossScaleOptimizer's
 * engine_optimizer): 'loss_scale' (the initial scale, finite > 0; absent:
 * none) and 'loss_scale_growth_steps' (1 .. 2^24, 2000 by default). */
static int parse_loss_scale(PyObject *d, cnn_net_spec *spec)
{
    double scale, growth;
    if (spec_dict_float(d, "loss_scale", 0.0, &scale, "optimizer") < 0 ||
        spec_dict_float(d, "loss_scale_growth_steps", 2000.0, &growth, "optimizer") < 0)
        return -1;
    if (PyDict_GetItemString(d, "loss_scale") && !(scale > 0.0 && scale <= 3.4e38)) {
        PyErr_Format(PyExc_ValueError,
                     "optimizer['loss_scale']: expected a finite number > 0, got %g", scale);
        return -1;
    }
    if (!(growth >= 1.0 && growth <= 16777216.0) || growth != (double)(long)growth) {
        PyErr_Format(PyExc_ValueError,
                     "optimizer['loss_scale_growth_steps']: expected an int in [1, 2^24], got %g",
                     growth);
        return -1;
    }
    spec->loss_scale = (float)scale;
    spec->loss_scale_growth_steps = (int)growth;
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
    for (Py_ssize_t i = 0; i < n_layers; i++) values += spec_rescaling_values(PyList_GET_ITEM(layers, i));
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
    if (parse_losses(loss, spec) < 0 || net_parse_optimizer(optimizer, &spec->optimizer) < 0 ||
        parse_loss_scale(optimizer, spec) < 0) {
        PyMem_Free(ls);
        return -1;
    }
    spec->layers = ls;
    spec->n_layers = (int)n_layers;
    *layer_specs = ls;
    *rank_out = rank;
    return 0;
}
