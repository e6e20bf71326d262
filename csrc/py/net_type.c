/* net_type.c: cnncuda._C.Net, a thin Python type over cnn_net.
 *
 * Net(device, layers, input_shape, max_batch, loss, optimizer, seed=0, threads=1,
 *     precision="float32", device_index=0)
 *   layers: list of dicts (see cnncuda/engine.py for the keys);
 *   loss: {"kind": ..., "from_logits": bool}; optimizer: {"kind": "adam"|"sgd", ...}.
 * Every array argument is checked here once (dtype, shape, finite values,
 * label range) before the core sees it -- except that weights and optimizer
 * state may hold NaN and infinities (a diverged model's, as Keras, so that
 * whatever get_weights gives, set_weights takes); the GIL is released
 * around core calls.
 */
#include "binding.h"

#include "../comm.h"

#include <limits.h>
#include <string.h>

typedef struct NetObject {
    PyObject_HEAD
    cnn_net *net;
    struct NetObject *live_prev, *live_next; /* the list of Nets holding a network */
    PyObject *device;     /* str */
    int in_rank;          /* 4 or 2 */
    npy_intp in_dims[3];  /* H, W, C or F */
    int out_rank;
    npy_intp out_dims[3];
    int loss_kind;
    int n_classes;        /* the output width k */
    int busy;             /* a core call is running with the GIL released */
    long data_n;          /* samples uploaded by set_data */
    PyObject *comm;       /* the Comm of its data-parallel group, or NULL */
} NetObject;

/* Nets whose core network exists (made and not yet freed), in a list: the
 * count is for the leak tests, the list for release_all_nets at exit. */
static long live_nets = 0;
static NetObject *live_head = NULL;

long cnn_py_live_nets(void) { return live_nets; }

static void live_add(NetObject *self)
{
    self->live_prev = NULL;
    self->live_next = live_head;
    if (live_head) live_head->live_prev = self;
    live_head = self;
    live_nets++;
}

/* Frees self's core network (its engine memory, handles and context) and
 * takes it off the list. */
static void live_release(NetObject *self)
{
    if (cnn_net_activate(self->net) != CNN_OK) { /* freeing goes on regardless */ }
    cnn_net_destroy(self->net);
    self->net = NULL;
    if (self->live_prev) self->live_prev->live_next = self->live_next;
    else live_head = self->live_next;
    if (self->live_next) self->live_next->live_prev = self->live_prev;
    self->live_prev = self->live_next = NULL;
    live_nets--;
}

long cnn_py_release_all_nets(void)
{
    long released = 0;
    NetObject *next;
    for (NetObject *n = live_head; n; n = next) {
        next = n->live_next;
        if (n->busy) continue; /* a core call runs on another thread: left to the exit */
        live_release(n);
        released++;
    }
    return released;
}

/* --------------------------------------------------------- spec parsing */

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
static const char *const optimizers[] = {"adam", "sgd"};

static int parse_layer(PyObject *d, int i, cnn_layer_spec *s)
{
    if (!PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError, "layers[%d]: expected a dict, got %.100s", i,
                     Py_TYPE(d)->tp_name);
        return -1;
    }
    PyObject *kind = PyDict_GetItemString(d, "kind");
    s->kind = name_index(kind, layer_kinds, 8);
    if (s->kind < 0) {
        PyErr_Format(PyExc_ValueError,
                     "layers[%d]['kind']: expected one of conv2d, maxpool, avgpool, flatten, "
                     "dense, activation, dropout, batchnorm, got %R",
                     i, kind ? kind : Py_None);
        return -1;
    }
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

static int parse_optimizer(PyObject *d, cnn_optimizer_desc *o)
{
    if (!PyDict_Check(d)) {
        PyErr_SetString(PyExc_TypeError, "optimizer: expected a dict with 'kind'");
        return -1;
    }
    PyObject *kind = PyDict_GetItemString(d, "kind");
    o->kind = name_index(kind, optimizers, 2);
    if (o->kind < 0) {
        PyErr_Format(PyExc_ValueError, "optimizer['kind']: expected 'adam' or 'sgd', got %R",
                     kind ? kind : Py_None);
        return -1;
    }
    double lr, b1, b2, eps, momentum;
    if (dict_float(d, "learning_rate", o->kind == CNN_OPT_ADAM ? 1e-3 : 1e-2, &lr, "optimizer") < 0 ||
        dict_float(d, "beta_1", 0.9, &b1, "optimizer") < 0 ||
        dict_float(d, "beta_2", 0.999, &b2, "optimizer") < 0 ||
        dict_float(d, "epsilon", 1e-7, &eps, "optimizer") < 0 ||
        dict_float(d, "momentum", 0.0, &momentum, "optimizer") < 0)
        return -1;
    PyObject *nesterov = PyDict_GetItemString(d, "nesterov");
    o->nesterov = nesterov ? PyObject_IsTrue(nesterov) : 0;
    if (o->nesterov < 0) return -1;
    o->lr = (float)lr;
    o->beta_1 = (float)b1;
    o->beta_2 = (float)b2;
    o->epsilon = (float)eps;
    o->momentum = (float)momentum;
    return 0;
}

/* ---------------------------------------------------------- lifetime */

static int Net_init(NetObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"device", "layers", "input_shape", "max_batch", "loss",
                             "optimizer", "seed", "threads", "precision", "device_index", NULL};
    const char *device, *precision = "float32";
    PyObject *layers, *input_shape, *loss, *optimizer;
    int max_batch, threads = 1, device_index = 0;
    unsigned long long seed = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "sOOiOO|Kisi", kwlist, &device, &layers,
                                     &input_shape, &max_batch, &loss, &optimizer, &seed,
                                     &threads, &precision, &device_index))
        return -1;
    if (device_index < 0) {
        PyErr_Format(PyExc_ValueError, "device_index: expected a device number >= 0, got %d",
                     device_index);
        return -1;
    }
    if (strcmp(precision, "float32") != 0 && strcmp(precision, "tf32") != 0) {
        PyErr_Format(PyExc_ValueError, "precision: expected 'float32' or 'tf32', got '%s'",
                     precision);
        return -1;
    }
    if (self->net) {
        PyErr_SetString(PyExc_RuntimeError, "Net.__init__ may be called only once");
        return -1;
    }
    cnn_status st;
    const cnn_backend *be = cnn_backend_find(device, &st);
    if (!be) {
        cnn_raise_status(st);
        return -1;
    }
    if (!PyList_Check(layers) || PyList_GET_SIZE(layers) < 1) {
        PyErr_SetString(PyExc_ValueError, "layers: expected a non-empty list of layer dicts");
        return -1;
    }
    cnn_net_spec spec;
    memset(&spec, 0, sizeof spec);
    PyObject *shape = PySequence_Fast(input_shape, "input_shape: expected a tuple of ints");
    if (!shape) return -1;
    Py_ssize_t rank = PySequence_Fast_GET_SIZE(shape);
    long dims[3] = {0, 0, 0};
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
        spec.in_h = (int)dims[0];
        spec.in_w = (int)dims[1];
        spec.in_c = (int)dims[2];
    } else {
        spec.in_c = (int)dims[0];
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
    if (parse_loss(loss, &spec.loss) < 0 || parse_optimizer(optimizer, &spec.optimizer) < 0) {
        PyMem_Free(ls);
        return -1;
    }
    spec.layers = ls;
    spec.n_layers = (int)n_layers;
    spec.max_batch = max_batch;
    spec.seed = seed;
    spec.allow_tf32 = strcmp(precision, "tf32") == 0;
    spec.device = device_index;
    if (threads < 1) threads = 1;
    cnn_net *net = NULL;
    Py_BEGIN_ALLOW_THREADS
    st = cnn_net_create(be, threads, &spec, &net);
    Py_END_ALLOW_THREADS
    PyMem_Free(ls);
    if (st != CNN_OK) {
        cnn_raise_status(st);
        return -1;
    }
    self->net = net;
    live_add(self);
    self->device = PyUnicode_FromString(device);
    self->in_rank = rank == 3 ? 4 : 2;
    for (int i = 0; i < 3; i++) self->in_dims[i] = dims[i];
    int out_rank, out_dims[3];
    cnn_net_output_shape(net, &out_rank, out_dims);
    self->out_rank = out_rank;
    for (int i = 0; i < 3; i++) self->out_dims[i] = out_dims[i];
    self->loss_kind = spec.loss.kind;
    self->n_classes = out_rank == 2 ? out_dims[0] : 0;
    return 0;
}

static void Net_dealloc(NetObject *self)
{
    if (self->net) live_release(self);
    cnn_comm_use(self->comm, -1);
    Py_XDECREF(self->comm);
    Py_XDECREF(self->device);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* ---------------------------------------------------- argument checks */

static int ready(NetObject *self)
{
    if (!self->net) {
        PyErr_SetString(PyExc_RuntimeError,
                        self->device ? "this Net's engine memory was released "
                                       "(by release_all_nets, at interpreter exit)"
                                     : "this Net was not initialized");
        return 0;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "this Net is already running a call on another thread");
        return 0;
    }
    /* a GPU engine's device becomes this thread's: the calls that follow,
     * on this thread, reach the right GPU */
    cnn_status st = cnn_net_activate(self->net);
    if (st != CNN_OK) {
        cnn_raise_status(st);
        return 0;
    }
    return 1;
}

/* ready(), then marks the Net busy for a call that releases the GIL. A
 * method checks ready() first and again here, just before the core runs:
 * NumPy may release the GIL while it converts the arguments, and another
 * thread may have started a call on this Net meanwhile. */
static int claim(NetObject *self)
{
    if (!ready(self)) return 0;
    self->busy = 1;
    return 1;
}

/* x as float32 of shape (n, *input_shape) with 1 <= n (<= limit when > 0),
 * converted and checked as the core converts set_data's samples. */
static PyArrayObject *input_array(NetObject *self, PyObject *obj, long limit)
{
    cnn_host_array host;
    PyArrayObject *raw = cnn_as_samples(obj, "x", &host);
    if (!raw) return NULL;
    PyArrayObject *x = NULL;
    npy_intp want[4] = {-1, self->in_dims[0], self->in_dims[1], self->in_dims[2]};
    int rank = self->in_rank == 4 ? 4 : 2;
    if (cnn_check_shape(raw, "x", rank, want) < 0) goto done;
    npy_intp n = PyArray_DIMS(raw)[0];
    if (n < 1) {
        PyErr_SetString(PyExc_ValueError, "x: expected at least one sample, got an empty batch");
        goto done;
    }
    if (limit > 0 && n > limit) {
        PyErr_Format(PyExc_ValueError,
                     "x: expected a batch of at most %ld samples (the max_batch this network "
                     "was built for), got %ld",
                     limit, (long)n);
        goto done;
    }
    x = cnn_checked_float32(raw, &host);
done:
    Py_DECREF(raw);
    return x;
}

/* x as samples of shape (n, *input_shape) with 1 <= n, for the core to
 * convert and check as it uploads them (cnn_as_samples fills host). Errors
 * name `arg` and count flat indices from index0 (x a part of the user's
 * array, from its value index0 on). */
static PyArrayObject *sample_array(NetObject *self, PyObject *obj, const char *arg,
                                   Py_ssize_t index0, cnn_host_array *host)
{
    if (index0 < 0) {
        PyErr_Format(PyExc_ValueError, "x_index0: expected an int >= 0, got %zd", index0);
        return NULL;
    }
    PyArrayObject *x = cnn_as_samples(obj, arg, host);
    if (!x) return NULL;
    host->index0 = (size_t)index0;
    npy_intp want[4] = {-1, self->in_dims[0], self->in_dims[1], self->in_dims[2]};
    if (cnn_check_shape(x, arg, self->in_rank == 4 ? 4 : 2, want) < 0) goto fail;
    if (PyArray_DIMS(x)[0] < 1) {
        PyErr_Format(PyExc_ValueError, "%s: expected at least one sample, got an empty batch",
                     arg);
        goto fail;
    }
    return x;
fail:
    Py_DECREF(x);
    return NULL;
}

/* Targets for n samples: *labels (int32) for sparse losses, *targets
 * (float32 (n, k)) otherwise; the other is set to NULL. */
static int target_arrays(NetObject *self, PyObject *obj, npy_intp n, PyArrayObject **labels,
                         PyArrayObject **targets)
{
    *labels = *targets = NULL;
    PyArrayObject *y = cnn_as_float32(obj, "y");
    if (!y) return -1;
    int k = self->n_classes;
    if (self->loss_kind == CNN_LOSS_SPARSE_CE) {
        int ok = (PyArray_NDIM(y) == 1 && PyArray_DIMS(y)[0] == n) ||
                 (PyArray_NDIM(y) == 2 && PyArray_DIMS(y)[0] == n && PyArray_DIMS(y)[1] == 1);
        if (!ok) {
            char got[128];
            cnn_shape_text(got, sizeof got, PyArray_NDIM(y), PyArray_DIMS(y));
            PyErr_Format(PyExc_ValueError, "y: expected shape (%ld,) or (%ld, 1), got %s",
                         (long)n, (long)n, got);
            goto fail;
        }
        /* labels must be integers in [0, k): read them from the original
         * object so float labels like 2.5 are refused, not truncated */
        PyArrayObject *raw = (PyArrayObject *)PyArray_FROM_OTF(obj, NPY_FLOAT64, NPY_ARRAY_IN_ARRAY | NPY_ARRAY_FORCECAST);
        if (!raw) goto fail;
        npy_intp dims[1] = {n};
        *labels = (PyArrayObject *)PyArray_SimpleNew(1, dims, NPY_INT32);
        if (!*labels) {
            Py_DECREF(raw);
            goto fail;
        }
        const double *src = PyArray_DATA(raw);
        int32_t *dst = PyArray_DATA(*labels);
        for (npy_intp i = 0; i < n; i++) {
            double v = src[i];
            if (!(v >= 0.0 && v < (double)k && v == (double)(long)v)) {
                char text[64];
                snprintf(text, sizeof text, "%.17g", v);
                PyErr_Format(PyExc_ValueError,
                             "y: expected integer class labels in [0, %d), got %s at index %ld",
                             k, text, (long)i);
                Py_DECREF(raw);
                goto fail;
            }
            dst[i] = (int32_t)v;
        }
        Py_DECREF(raw);
        Py_DECREF(y);
        return 0;
    }
    npy_intp want[2] = {n, k};
    if (k == 1 && PyArray_NDIM(y) == 1 && PyArray_DIMS(y)[0] == n) {
        /* binary targets of shape (n,) for a one-unit output */
    } else if (cnn_check_shape(y, "y", 2, want) < 0) {
        goto fail;
    }
    if (cnn_check_finite(y, "y") < 0) goto fail;
    *targets = y;
    return 0;
fail:
    Py_XDECREF(*labels);
    *labels = NULL;
    Py_DECREF(y);
    return -1;
}

static PyObject *new_output(NetObject *self, npy_intp n)
{
    npy_intp dims[4] = {n, self->out_dims[0], self->out_dims[1], self->out_dims[2]};
    return PyArray_SimpleNew(self->out_rank == 4 ? 4 : 2, dims, NPY_FLOAT32);
}

/* ------------------------------------------------------------ methods */

typedef enum { TRAIN, GRADIENTS } loss_call;

static PyObject *run_loss_call(NetObject *self, PyObject *args, loss_call what)
{
    PyObject *xo, *yo;
    if (!PyArg_ParseTuple(args, "OO", &xo, &yo) || !ready(self)) return NULL;
    if (self->out_rank != 2) {
        PyErr_SetString(PyExc_ValueError,
                         "the loss needs a (batch, classes) output; this network's output is "
                         "an image");
        return NULL;
    }
    PyArrayObject *x = input_array(self, xo, cnn_net_max_batch(self->net));
    if (!x) return NULL;
    npy_intp n = PyArray_DIMS(x)[0];
    PyArrayObject *labels, *targets;
    if (target_arrays(self, yo, n, &labels, &targets) < 0) {
        Py_DECREF(x);
        return NULL;
    }
    const float *xp = PyArray_DATA(x);
    const int32_t *lp = labels ? PyArray_DATA(labels) : NULL;
    const float *tp = targets ? PyArray_DATA(targets) : NULL;
    float loss = 0.0f, correct = 0.0f;
    cnn_status st;
    if (!claim(self)) {
        Py_DECREF(x);
        Py_XDECREF(labels);
        Py_XDECREF(targets);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    if (what == TRAIN)
        st = cnn_net_train_batch(self->net, (int)n, xp, lp, tp, &loss, &correct);
    else
        st = cnn_net_compute_gradients(self->net, (int)n, xp, lp, tp, &loss, &correct);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    Py_DECREF(x);
    Py_XDECREF(labels);
    Py_XDECREF(targets);
    if (st != CNN_OK) return cnn_raise_status(st);
    return Py_BuildValue("(dd)", (double)loss, (double)correct);
}

static PyObject *Net_train_batch(NetObject *self, PyObject *args)
{
    return run_loss_call(self, args, TRAIN);
}

static PyObject *Net_compute_gradients(NetObject *self, PyObject *args)
{
    return run_loss_call(self, args, GRADIENTS);
}

/* Calls over whole arrays of samples, which the core converts and checks
 * as it uploads them: evaluate, set_data (fit's training set) and
 * set_validation (fit's validation set). */
typedef enum { EVALUATE, SET_DATA, SET_VALIDATION } rows_call;

static PyObject *run_rows_call(NetObject *self, PyObject *args, PyObject *kwds, rows_call what)
{
    static char *kwlist[] = {"x", "y", "x_arg", "x_index0", NULL};
    PyObject *xo, *yo;
    const char *x_arg = "x";
    Py_ssize_t index0 = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|sn", kwlist, &xo, &yo, &x_arg, &index0) ||
        !ready(self))
        return NULL;
    if (self->out_rank != 2) {
        PyErr_SetString(PyExc_ValueError,
                        "the loss needs a (batch, classes) output; this network's output is "
                        "an image");
        return NULL;
    }
    cnn_host_array host;
    PyArrayObject *x = sample_array(self, xo, x_arg, index0, &host);
    if (!x) return NULL;
    npy_intp n = PyArray_DIMS(x)[0];
    PyArrayObject *labels, *targets;
    if (target_arrays(self, yo, n, &labels, &targets) < 0) {
        Py_DECREF(x);
        return NULL;
    }
    const int32_t *lp = labels ? PyArray_DATA(labels) : NULL;
    const float *tp = targets ? PyArray_DATA(targets) : NULL;
    double loss = 0.0, correct = 0.0;
    cnn_status st;
    if (!claim(self)) {
        Py_DECREF(x);
        Py_XDECREF(labels);
        Py_XDECREF(targets);
        return NULL;
    }
    if (what == SET_DATA) self->data_n = 0; /* the core drops the old data first */
    Py_BEGIN_ALLOW_THREADS
    if (what == EVALUATE)
        st = cnn_net_evaluate(self->net, (long)n, &host, lp, tp, &loss, &correct);
    else if (what == SET_DATA)
        st = cnn_net_set_data(self->net, (long)n, &host, lp, tp);
    else
        st = cnn_net_set_validation(self->net, (long)n, &host, lp, tp);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    Py_DECREF(x);
    Py_XDECREF(labels);
    Py_XDECREF(targets);
    if (st != CNN_OK) return cnn_raise_status(st);
    if (what == EVALUATE) return Py_BuildValue("(dd)", loss, correct);
    if (what == SET_DATA) self->data_n = (long)n;
    Py_RETURN_NONE;
}

static PyObject *Net_evaluate(NetObject *self, PyObject *args, PyObject *kwds)
{
    return run_rows_call(self, args, kwds, EVALUATE);
}

/* set_validation(x, y, x_arg="x", x_index0=0), or set_validation(None, None) to drop it */
static PyObject *Net_set_validation(NetObject *self, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) == 2 && PyTuple_GET_ITEM(args, 0) == Py_None &&
        PyTuple_GET_ITEM(args, 1) == Py_None && (!kwds || !PyDict_Size(kwds))) {
        if (!claim(self)) return NULL;
        cnn_status st = cnn_net_set_validation(self->net, 0, NULL, NULL, NULL);
        self->busy = 0;
        if (st != CNN_OK) return cnn_raise_status(st);
        Py_RETURN_NONE;
    }
    return run_rows_call(self, args, kwds, SET_VALIDATION);
}

static PyObject *Net_evaluate_validation(NetObject *self, PyObject *noargs)
{
    (void)noargs;
    if (!claim(self)) return NULL;
    double loss = 0.0, correct = 0.0;
    cnn_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cnn_net_evaluate_validation(self->net, &loss, &correct);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (st != CNN_OK) return cnn_raise_status(st);
    return Py_BuildValue("(dd)", loss, correct);
}

static PyObject *Net_apply_gradients(NetObject *self, PyObject *noargs)
{
    (void)noargs;
    if (!ready(self)) return NULL;
    cnn_status st;
    self->busy = 1; /* the GIL is released: another thread must find the Net busy */
    Py_BEGIN_ALLOW_THREADS
    st = cnn_net_apply_gradients(self->net);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (st != CNN_OK) return cnn_raise_status(st);
    Py_RETURN_NONE;
}

/* x in, a new output array out: a forward of one batch (at most max_batch,
 * training or not). */
static PyObject *run_output_call(NetObject *self, PyObject *xo, int training)
{
    PyArrayObject *x = input_array(self, xo, cnn_net_max_batch(self->net));
    if (!x) return NULL;
    npy_intp n = PyArray_DIMS(x)[0];
    PyObject *y = new_output(self, n);
    if (!y) {
        Py_DECREF(x);
        return NULL;
    }
    cnn_status st;
    const float *xp = PyArray_DATA(x);
    float *yp = PyArray_DATA((PyArrayObject *)y);
    if (!claim(self)) {
        Py_DECREF(x);
        Py_DECREF(y);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    st = cnn_net_forward(self->net, (int)n, xp, training, yp);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    Py_DECREF(x);
    if (st != CNN_OK) {
        Py_DECREF(y);
        return cnn_raise_status(st);
    }
    return y;
}

static PyObject *Net_forward(NetObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"x", "training", NULL};
    PyObject *xo;
    int training = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|p", kwlist, &xo, &training) || !ready(self))
        return NULL;
    return run_output_call(self, xo, training);
}

/* predict(x, x_arg="x", x_index0=0): outputs of any number of samples, which the core
 * converts and checks as it uploads them. */
static PyObject *Net_predict(NetObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"x", "x_arg", "x_index0", NULL};
    PyObject *xo;
    const char *x_arg = "x";
    Py_ssize_t index0 = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|sn", kwlist, &xo, &x_arg, &index0) ||
        !ready(self))
        return NULL;
    cnn_host_array host;
    PyArrayObject *x = sample_array(self, xo, x_arg, index0, &host);
    if (!x) return NULL;
    npy_intp n = PyArray_DIMS(x)[0];
    PyObject *y = new_output(self, n);
    if (!y) {
        Py_DECREF(x);
        return NULL;
    }
    float *yp = PyArray_DATA((PyArrayObject *)y);
    if (!claim(self)) {
        Py_DECREF(x);
        Py_DECREF(y);
        return NULL;
    }
    cnn_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cnn_net_predict(self->net, (long)n, &host, yp);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    Py_DECREF(x);
    if (st != CNN_OK) {
        Py_DECREF(y);
        return cnn_raise_status(st);
    }
    return y;
}

/* backward(dy) -> dx, for the last training forward. */
static PyObject *Net_backward(NetObject *self, PyObject *args)
{
    PyObject *dyo;
    if (!PyArg_ParseTuple(args, "O", &dyo) || !ready(self)) return NULL;
    PyArrayObject *dy = cnn_as_float32(dyo, "dy");
    if (!dy) return NULL;
    /* the batch of the last training forward is the first dim of dy; the
     * core checks it matches */
    npy_intp want[4] = {-1, self->out_dims[0], self->out_dims[1], self->out_dims[2]};
    if (cnn_check_shape(dy, "dy", self->out_rank == 4 ? 4 : 2, want) < 0 ||
        cnn_check_finite(dy, "dy") < 0) {
        Py_DECREF(dy);
        return NULL;
    }
    npy_intp n = PyArray_DIMS(dy)[0];
    npy_intp dims[4] = {n, self->in_dims[0], self->in_dims[1], self->in_dims[2]};
    PyObject *dx = PyArray_SimpleNew(self->in_rank == 4 ? 4 : 2, dims, NPY_FLOAT32);
    if (!dx) {
        Py_DECREF(dy);
        return NULL;
    }
    cnn_status st;
    const float *dyp = PyArray_DATA(dy);
    float *dxp = PyArray_DATA((PyArrayObject *)dx);
    if (!claim(self)) {
        Py_DECREF(dy);
        Py_DECREF(dx);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    st = cnn_net_backward(self->net, (int)n, dyp, dxp);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    Py_DECREF(dy);
    if (st != CNN_OK) {
        Py_DECREF(dx);
        return cnn_raise_status(st);
    }
    return dx;
}

/* set_data(x, y, x_arg="x", x_index0=0): the training set, uploaded once. */
static PyObject *Net_set_data(NetObject *self, PyObject *args, PyObject *kwds)
{
    return run_rows_call(self, args, kwds, SET_DATA);
}

/* set_order(order): an epoch's sample order, n indices into the data. */
static PyObject *Net_set_order(NetObject *self, PyObject *arg)
{
    if (!ready(self)) return NULL;
    if (self->data_n == 0) {
        PyErr_SetString(PyExc_ValueError, "set_order needs set_data first");
        return NULL;
    }
    PyArrayObject *any = (PyArrayObject *)PyArray_FROMANY(arg, NPY_NOTYPE, 0, 0, 0);
    if (!any) return NULL;
    char kind = PyArray_DESCR(any)->kind;
    if (kind != 'i' && kind != 'u') {
        Py_DECREF(any);
        PyErr_SetString(PyExc_TypeError, "order: expected an integer array");
        return NULL;
    }
    /* forced: uint64 indices are fine too (past 2**63 they turn negative and
     * are refused below) */
    PyArrayObject *order = (PyArrayObject *)PyArray_FROM_OTF(
        (PyObject *)any, NPY_INT64, NPY_ARRAY_IN_ARRAY | NPY_ARRAY_FORCECAST);
    Py_DECREF(any);
    if (!order) return NULL;
    npy_intp want[1] = {self->data_n};
    if (cnn_check_shape(order, "order", 1, want) < 0) {
        Py_DECREF(order);
        return NULL;
    }
    const int64_t *src = PyArray_DATA(order);
    npy_intp dims[1] = {self->data_n};
    PyArrayObject *o32 = (PyArrayObject *)PyArray_SimpleNew(1, dims, NPY_INT32);
    if (!o32) {
        Py_DECREF(order);
        return NULL;
    }
    int32_t *dst = PyArray_DATA(o32);
    for (npy_intp i = 0; i < self->data_n; i++) {
        if (src[i] < 0 || src[i] >= self->data_n) {
            PyErr_Format(PyExc_ValueError, "order: expected indices in [0, %ld), got %lld at "
                         "position %ld", self->data_n, (long long)src[i], (long)i);
            Py_DECREF(order);
            Py_DECREF(o32);
            return NULL;
        }
        dst[i] = (int32_t)src[i];
    }
    Py_DECREF(order);
    if (!ready(self)) { /* NumPy may have released the GIL while converting */
        Py_DECREF(o32);
        return NULL;
    }
    cnn_status st = cnn_net_set_order(self->net, dst);
    Py_DECREF(o32);
    if (st != CNN_OK) return cnn_raise_status(st);
    Py_RETURN_NONE;
}

/* train_range(start, count, batch): steps over order[start, start + count). */
static PyObject *Net_train_range(NetObject *self, PyObject *args)
{
    long start, count;
    int batch;
    if (!PyArg_ParseTuple(args, "lli", &start, &count, &batch) || !ready(self)) return NULL;
    cnn_status st;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    st = cnn_net_train_range(self->net, start, count, batch);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (st != CNN_OK) return cnn_raise_status(st);
    Py_RETURN_NONE;
}

/* read_sums(reset=True) -> (loss_sum, correct) of train_range since the last reset. */
static PyObject *Net_read_sums(NetObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"reset", NULL};
    int reset = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|p", kwlist, &reset) || !ready(self))
        return NULL;
    double loss, correct;
    cnn_status st;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    st = cnn_net_read_sums(self->net, reset, &loss, &correct);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (st != CNN_OK) return cnn_raise_status(st);
    return Py_BuildValue("(dd)", loss, correct);
}

/* set_comm(comm or None): joins (or leaves) a data-parallel group: a
 * collective call, which every rank of the group makes. */
static PyObject *Net_set_comm(NetObject *self, PyObject *arg)
{
    if (arg != Py_None && arg == self->comm) Py_RETURN_NONE; /* already in this group */
    cnn_comm *comm = NULL;
    if (arg != Py_None && !(comm = cnn_comm_of(arg))) return NULL;
    if (!ready(self)) return NULL;
    /* counted before the GIL is released: no other Net may join through it */
    PyObject *joining = arg == Py_None ? NULL : arg;
    cnn_comm_use(joining, +1);
    cnn_status st;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    st = cnn_net_set_comm(self->net, comm);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (st != CNN_OK) {
        cnn_comm_use(joining, -1);
        /* the group's other ranks are waiting in the same call */
        if (comm) {
            Py_BEGIN_ALLOW_THREADS
            comm->abort(comm, "a rank could not join the group");
            Py_END_ALLOW_THREADS
        }
        return cnn_raise_status(st);
    }
    cnn_comm_use(self->comm, -1);
    Py_XDECREF(self->comm);
    self->comm = Py_XNewRef(joining);
    Py_RETURN_NONE;
}

/* reduce_sums(): train_range's running sums summed over the group (collective). */
static PyObject *Net_reduce_sums(NetObject *self, PyObject *noargs)
{
    (void)noargs;
    if (!ready(self)) return NULL;
    cnn_status st;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    st = cnn_net_reduce_sums(self->net);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (st != CNN_OK) return cnn_raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *weight_array(NetObject *self, int i, int gradient)
{
    const cnn_weight_info *w = cnn_net_weight(self->net, i);
    npy_intp dims[4];
    for (int k = 0; k < w->rank; k++) dims[k] = w->dims[k];
    PyObject *a = PyArray_SimpleNew(w->rank, dims, NPY_FLOAT32);
    if (!a) return NULL;
    cnn_status st = gradient ? cnn_net_get_gradient(self->net, i, PyArray_DATA((PyArrayObject *)a))
                             : cnn_net_get_weight(self->net, i, PyArray_DATA((PyArrayObject *)a));
    if (st != CNN_OK) {
        Py_DECREF(a);
        return cnn_raise_status(st);
    }
    return a;
}

static PyObject *weight_list(NetObject *self, int gradients)
{
    if (!ready(self)) return NULL;
    PyObject *list = PyList_New(0);
    if (!list) return NULL;
    for (int i = 0; i < cnn_net_weight_count(self->net); i++) {
        if (gradients && !cnn_net_weight(self->net, i)->trainable) continue;
        PyObject *a = weight_array(self, i, gradients);
        if (!a || PyList_Append(list, a) < 0) {
            Py_XDECREF(a);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(a);
    }
    return list;
}

static PyObject *Net_get_weights(NetObject *self, PyObject *noargs)
{
    (void)noargs;
    return weight_list(self, 0);
}

static PyObject *Net_get_gradients(NetObject *self, PyObject *noargs)
{
    (void)noargs;
    return weight_list(self, 1);
}

/* set_weights(list): every array is checked before any is written. */
static PyObject *Net_set_weights(NetObject *self, PyObject *arg)
{
    if (!ready(self)) return NULL;
    int count = cnn_net_weight_count(self->net);
    PyObject *seq = PySequence_Fast(arg, "weights: expected a list of arrays");
    if (!seq) return NULL;
    if (PySequence_Fast_GET_SIZE(seq) != count) {
        PyErr_Format(PyExc_ValueError, "weights: expected a list of %d arrays, got %zd", count,
                     PySequence_Fast_GET_SIZE(seq));
        Py_DECREF(seq);
        return NULL;
    }
    PyArrayObject **arrays = PyMem_Calloc((size_t)(count ? count : 1), sizeof *arrays);
    PyObject *result = NULL;
    if (!arrays) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (int i = 0; i < count; i++) {
        char name[32];
        snprintf(name, sizeof name, "weights[%d]", i);
        const cnn_weight_info *w = cnn_net_weight(self->net, i);
        npy_intp dims[4];
        for (int k = 0; k < w->rank; k++) dims[k] = w->dims[k];
        arrays[i] = cnn_as_float32(PySequence_Fast_GET_ITEM(seq, i), name);
        if (!arrays[i] || cnn_check_shape(arrays[i], name, w->rank, dims) < 0)
            goto done;
    }
    if (!ready(self)) goto done; /* NumPy may have released the GIL while converting */
    for (int i = 0; i < count; i++) {
        cnn_status st = cnn_net_set_weight(self->net, i, PyArray_DATA(arrays[i]));
        if (st != CNN_OK) {
            cnn_raise_status(st);
            goto done;
        }
    }
    result = Py_None;
    Py_INCREF(result);
done:
    for (int i = 0; i < count; i++) Py_XDECREF(arrays[i]);
    PyMem_Free(arrays);
    Py_DECREF(seq);
    return result;
}

/* get_optimizer_state() -> {"steps", "training_forwards", "slots"}: slots
 * holds, per trainable weight in get_gradients order, the list of its
 * optimizer arrays (Adam: [m, v]; SGD with momentum: [velocity]; else []). */
static PyObject *Net_get_optimizer_state(NetObject *self, PyObject *noargs)
{
    (void)noargs;
    if (!ready(self)) return NULL;
    int n_slots = cnn_net_optimizer_slots(self->net);
    PyObject *slots = PyList_New(0);
    if (!slots) return NULL;
    for (int i = 0; i < cnn_net_weight_count(self->net); i++) {
        const cnn_weight_info *w = cnn_net_weight(self->net, i);
        if (!w->trainable) continue;
        PyObject *per = PyList_New(0);
        if (!per || PyList_Append(slots, per) < 0) {
            Py_XDECREF(per);
            Py_DECREF(slots);
            return NULL;
        }
        Py_DECREF(per);
        for (int s = 0; s < n_slots; s++) {
            npy_intp dims[4];
            for (int k = 0; k < w->rank; k++) dims[k] = w->dims[k];
            PyObject *a = PyArray_SimpleNew(w->rank, dims, NPY_FLOAT32);
            cnn_status st = a ? cnn_net_get_slot(self->net, i, s, PyArray_DATA((PyArrayObject *)a))
                              : CNN_OK;
            if (!a || st != CNN_OK || PyList_Append(per, a) < 0) {
                if (a && st != CNN_OK) cnn_raise_status(st);
                Py_XDECREF(a);
                Py_DECREF(slots);
                return NULL;
            }
            Py_DECREF(a);
        }
    }
    return Py_BuildValue("{s:l,s:l,s:N}", "steps", cnn_net_step_count(self->net),
                         "training_forwards", cnn_net_train_forward_count(self->net), "slots",
                         slots);
}

/* set_optimizer_state(state): the dict get_optimizer_state gives; every
 * array is checked before anything is written. */
static PyObject *Net_set_optimizer_state(NetObject *self, PyObject *state)
{
    if (!ready(self)) return NULL;
    if (!PyDict_Check(state)) {
        PyErr_SetString(PyExc_TypeError, "state: expected the dict get_optimizer_state returns");
        return NULL;
    }
    PyObject *steps_o = PyDict_GetItemString(state, "steps");
    PyObject *fw_o = PyDict_GetItemString(state, "training_forwards");
    PyObject *slots = PyDict_GetItemString(state, "slots");
    long steps = steps_o ? PyLong_AsLong(steps_o) : -1;
    long forwards = fw_o ? PyLong_AsLong(fw_o) : -1;
    if (PyErr_Occurred() || steps < 0 || forwards < 0 || !slots || !PyList_Check(slots)) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError,
                        "state: expected {'steps': int >= 0, 'training_forwards': int >= 0, "
                        "'slots': list}");
        return NULL;
    }
    int n_slots = cnn_net_optimizer_slots(self->net);
    int count = cnn_net_weight_count(self->net);
    int trainable = 0;
    for (int i = 0; i < count; i++) trainable += cnn_net_weight(self->net, i)->trainable;
    if (PyList_GET_SIZE(slots) != trainable) {
        PyErr_Format(PyExc_ValueError, "state['slots']: expected %d entries (one per trainable "
                     "weight), got %zd", trainable, PyList_GET_SIZE(slots));
        return NULL;
    }
    size_t total = (size_t)trainable * (n_slots ? n_slots : 1);
    PyArrayObject **arrays = PyMem_Calloc(total, sizeof *arrays);
    if (!arrays) return PyErr_NoMemory();
    PyObject *result = NULL;
    int t = 0;
    for (int i = 0; i < count; i++) {
        const cnn_weight_info *w = cnn_net_weight(self->net, i);
        if (!w->trainable) continue;
        PyObject *per = PyList_GET_ITEM(slots, t);
        char name[48];
        snprintf(name, sizeof name, "state['slots'][%d]", t);
        if (!PySequence_Check(per) || PySequence_Size(per) != n_slots) {
            PyErr_Format(PyExc_ValueError, "%s: expected %d arrays", name, n_slots);
            goto done;
        }
        for (int s = 0; s < n_slots; s++) {
            npy_intp dims[4];
            for (int k = 0; k < w->rank; k++) dims[k] = w->dims[k];
            PyObject *item = PySequence_GetItem(per, s);
            if (!item) goto done;
            snprintf(name, sizeof name, "state['slots'][%d][%d]", t, s);
            PyArrayObject *a = cnn_as_float32(item, name);
            Py_DECREF(item);
            arrays[(size_t)t * n_slots + s] = a;
            if (!a || cnn_check_shape(a, name, w->rank, dims) < 0)
                goto done;
        }
        t++;
    }
    if (!ready(self)) goto done; /* NumPy may have released the GIL while converting */
    t = 0;
    for (int i = 0; i < count; i++) {
        if (!cnn_net_weight(self->net, i)->trainable) continue;
        for (int s = 0; s < n_slots; s++) {
            cnn_status st = cnn_net_set_slot(self->net, i, s,
                                             PyArray_DATA(arrays[(size_t)t * n_slots + s]));
            if (st != CNN_OK) {
                cnn_raise_status(st);
                goto done;
            }
        }
        t++;
    }
    cnn_status st = cnn_net_set_counters(self->net, steps, forwards);
    if (st != CNN_OK) {
        cnn_raise_status(st);
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    for (size_t k = 0; k < total; k++) Py_XDECREF(arrays[k]);
    PyMem_Free(arrays);
    return result;
}

/* set_optimizer(optimizer): the optimizer dict of the constructor (the
 * same kind); its hyperparameters apply from the next step on. */
static PyObject *Net_set_optimizer(NetObject *self, PyObject *optimizer)
{
    if (!ready(self)) return NULL;
    cnn_optimizer_desc o;
    if (parse_optimizer(optimizer, &o) < 0) return NULL;
    cnn_status st = cnn_net_set_optimizer(self->net, &o);
    if (st != CNN_OK) return cnn_raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *Net_get_training_forwards(NetObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(self->net ? cnn_net_train_forward_count(self->net) : 0);
}

static PyObject *Net_weight_info(NetObject *self, PyObject *noargs)
{
    (void)noargs;
    if (!ready(self)) return NULL;
    static const char *const roles[] = {"kernel", "bias", "gamma", "beta", "moving_mean",
                                        "moving_variance"};
    int count = cnn_net_weight_count(self->net);
    PyObject *list = PyList_New(count);
    if (!list) return NULL;
    for (int i = 0; i < count; i++) {
        const cnn_weight_info *w = cnn_net_weight(self->net, i);
        PyObject *shape = PyTuple_New(w->rank);
        if (!shape) {
            Py_DECREF(list);
            return NULL;
        }
        for (int k = 0; k < w->rank; k++) PyTuple_SET_ITEM(shape, k, PyLong_FromLong(w->dims[k]));
        PyObject *item = Py_BuildValue("{s:i,s:s,s:O,s:N}", "layer", w->layer, "name",
                                       roles[w->role], "trainable",
                                       w->trainable ? Py_True : Py_False, "shape", shape);
        if (!item) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *Net_get_output_shape(NetObject *self, void *closure)
{
    (void)closure;
    if (!self->net) Py_RETURN_NONE;
    return self->out_rank == 4 ? Py_BuildValue("(nnn)", self->out_dims[0], self->out_dims[1],
                                               self->out_dims[2])
                               : Py_BuildValue("(n)", self->out_dims[0]);
}

static PyObject *Net_get_max_batch(NetObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(self->net ? cnn_net_max_batch(self->net) : 0);
}

static PyObject *Net_get_steps(NetObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(self->net ? cnn_net_step_count(self->net) : 0);
}

static PyObject *Net_get_memory_bytes(NetObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromSize_t(self->net ? cnn_net_memory_bytes(self->net) : 0);
}

/* The engine's own measure of the last train_range (CUDA events on the GPU
 * engines; waits for the range to finish), or None. */
static PyObject *Net_get_last_range_seconds(NetObject *self, void *closure)
{
    (void)closure;
    if (!claim(self)) return NULL;
    double seconds = -1.0;
    cnn_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cnn_net_range_seconds(self->net, &seconds);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (st != CNN_OK) return cnn_raise_status(st);
    if (seconds < 0.0) Py_RETURN_NONE;
    return PyFloat_FromDouble(seconds);
}

static PyObject *Net_get_device(NetObject *self, void *closure)
{
    (void)closure;
    if (!self->device) Py_RETURN_NONE;
    Py_INCREF(self->device);
    return self->device;
}

static PyMethodDef Net_methods[] = {
    {"train_batch", (PyCFunction)Net_train_batch, METH_VARARGS,
     "train_batch(x, y) -> (loss_sum, correct): one optimizer step on a batch."},
    {"compute_gradients", (PyCFunction)Net_compute_gradients, METH_VARARGS,
     "compute_gradients(x, y) -> (loss_sum, correct): forward, loss, backward; no step."},
    {"apply_gradients", (PyCFunction)Net_apply_gradients, METH_NOARGS,
     "apply_gradients(): one optimizer step with the current gradients."},
    {"evaluate", (PyCFunction)(void (*)(void))Net_evaluate, METH_VARARGS | METH_KEYWORDS,
     "evaluate(x, y, x_arg='x', x_index0=0) -> (loss_sum, correct) over any number of samples."},
    {"forward", (PyCFunction)(void (*)(void))Net_forward, METH_VARARGS | METH_KEYWORDS,
     "forward(x, training=False) -> output of a batch of at most max_batch samples."},
    {"backward", (PyCFunction)Net_backward, METH_VARARGS,
     "backward(dy) -> dx for the last training forward; stores the parameter gradients."},
    {"predict", (PyCFunction)(void (*)(void))Net_predict, METH_VARARGS | METH_KEYWORDS,
     "predict(x, x_arg='x', x_index0=0) -> outputs for any number of samples (inference mode)."},
    {"set_data", (PyCFunction)(void (*)(void))Net_set_data, METH_VARARGS | METH_KEYWORDS,
     "set_data(x, y, x_arg='x', x_index0=0): upload the training set once (x converted to "
     "float32 and checked on the way; errors name x_arg and count flat indices from "
     "x_index0)."},
    {"set_validation", (PyCFunction)(void (*)(void))Net_set_validation,
     METH_VARARGS | METH_KEYWORDS,
     "set_validation(x, y, x_arg='x', x_index0=0): upload validation data once for evaluate_validation "
     "(None, None drops it)."},
    {"evaluate_validation", (PyCFunction)Net_evaluate_validation, METH_NOARGS,
     "evaluate_validation() -> (loss_sum, correct) over the data of set_validation, the "
     "bits evaluate gives."},
    {"set_order", (PyCFunction)Net_set_order, METH_O,
     "set_order(order): an epoch's order, len(x) indices into the data."},
    {"train_range", (PyCFunction)Net_train_range, METH_VARARGS,
     "train_range(start, count, batch): train on order[start:start+count] in batches."},
    {"read_sums", (PyCFunction)(void (*)(void))Net_read_sums, METH_VARARGS | METH_KEYWORDS,
     "read_sums(reset=True) -> (loss_sum, correct) accumulated by train_range."},
    {"set_comm", (PyCFunction)Net_set_comm, METH_O,
     "set_comm(comm): join a data-parallel group (every rank calls it; rank 0's weights "
     "and optimizer state win), or leave it (None)."},
    {"reduce_sums", (PyCFunction)Net_reduce_sums, METH_NOARGS,
     "reduce_sums(): train_range's running sums summed over the group (every rank calls "
     "it)."},
    {"get_weights", (PyCFunction)Net_get_weights, METH_NOARGS,
     "get_weights() -> list of float32 arrays in Keras order and layouts."},
    {"set_weights", (PyCFunction)Net_set_weights, METH_O,
     "set_weights(list): all arrays are checked before any is written."},
    {"get_gradients", (PyCFunction)Net_get_gradients, METH_NOARGS,
     "get_gradients() -> gradients of the trainable weights, Keras order and layouts."},
    {"get_optimizer_state", (PyCFunction)Net_get_optimizer_state, METH_NOARGS,
     "get_optimizer_state() -> {'steps', 'training_forwards', 'slots'}."},
    {"set_optimizer_state", (PyCFunction)Net_set_optimizer_state, METH_O,
     "set_optimizer_state(state): all arrays are checked before any is written."},
    {"set_optimizer", (PyCFunction)Net_set_optimizer, METH_O,
     "set_optimizer(dict): the optimizer's hyperparameters from the next step on (same kind)."},
    {"weight_info", (PyCFunction)Net_weight_info, METH_NOARGS,
     "weight_info() -> list of dicts: layer, name, trainable, shape."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Net_getset[] = {
    {"output_shape", (getter)Net_get_output_shape, NULL, "output shape without the batch", NULL},
    {"max_batch", (getter)Net_get_max_batch, NULL, "largest batch the buffers hold", NULL},
    {"steps", (getter)Net_get_steps, NULL, "optimizer steps taken", NULL},
    {"device", (getter)Net_get_device, NULL, "engine name", NULL},
    {"memory_bytes", (getter)Net_get_memory_bytes, NULL,
     "bytes of engine memory held: buffers, workspaces, resident data", NULL},
    {"last_range_seconds", (getter)Net_get_last_range_seconds, NULL,
     "seconds of the last train_range on the engine's clock (GPU engines), else None", NULL},
    {"training_forwards", (getter)Net_get_training_forwards, NULL,
     "training forwards run (they key dropout masks)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject cnn_NetType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cnncuda._C.Net",
    .tp_basicsize = sizeof(NetObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A Sequential network on one engine of the C core.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Net_init,
    .tp_dealloc = (destructor)Net_dealloc,
    .tp_methods = Net_methods,
    .tp_getset = Net_getset,
};
