/* net_type.c: cnncuda._C.Net, a thin Python type over cnn_net (the files
 * of its methods: net_object.h).
 *
 * Net(device, layers, input_shape, max_batch, loss, optimizer, seed=0, threads=1,
 *     precision="float32", device_index=0)
 *   layers: list of dicts (see cnncuda/engine.py for the keys);
 *   loss: {"kind": ..., "from_logits": bool}; optimizer: {"kind": "adam"|"sgd", ...}.
 * Every array argument is checked once (dtype, shape, finite values, label
 * range) before the core sees it -- except that weights and optimizer state
 * may hold NaN and infinities (a diverged model's, as Keras, so that
 * whatever get_weights gives, set_weights takes); the GIL is released
 * around core calls (net_call).
 */
#include "net_object.h"

#include <string.h>

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

/* ------------------------------------------------ readiness, the call */

int net_ready(NetObject *self)
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

int net_call_status(NetObject *self, net_core_fn fn, void *args, cnn_status *st)
{
    if (!net_ready(self)) return -1;
    self->busy = 1; /* the GIL is released: another thread must find the Net busy */
    cnn_net *net = self->net;
    Py_BEGIN_ALLOW_THREADS
    *st = fn(net, args);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    return 0;
}

int net_call(NetObject *self, net_core_fn fn, void *args)
{
    cnn_status st;
    if (net_call_status(self, fn, args, &st)) return -1;
    if (st != CNN_OK) {
        cnn_raise_status(st);
        return -1;
    }
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
    static const char *const precision_names[CNN_PRECISIONS] = CNN_PRECISION_NAMES;
    int precision_kind = -1;
    for (int i = 0; i < CNN_PRECISIONS; i++)
        if (strcmp(precision, precision_names[i]) == 0) precision_kind = i;
    if (precision_kind < 0) {
        PyErr_Format(PyExc_ValueError,
                     "precision: expected 'float32', 'tf32', 'bf16' or 'fp16', got '%s'",
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
    cnn_net_spec spec;
    cnn_layer_spec *layer_specs;
    long dims[3];
    Py_ssize_t rank;
    if (net_spec_parse(layers, input_shape, loss, optimizer, &spec, &layer_specs, dims, &rank) < 0)
        return -1;
    spec.max_batch = max_batch;
    spec.seed = seed;
    spec.precision = precision_kind;
    spec.device = device_index;
    if (threads < 1) threads = 1;
    cnn_net *net = NULL;
    Py_BEGIN_ALLOW_THREADS
    st = cnn_net_create(be, threads, &spec, &net);
    Py_END_ALLOW_THREADS
    PyMem_Free(layer_specs);
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
    self->n_classes = out_rank == 2 ? out_dims[0] : out_dims[2];
    self->positions = out_rank == 4 ? out_dims[0] * out_dims[1] : 1;
    self->loss_weighted = spec.loss.weighted;
    if (spec.n_parts) { /* several outputs: their packed float targets (n, width) */
        self->n_classes = (int)cnn_net_target_width(net);
        self->positions = 1;
    }
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

/* ------------------------------------------------- getters, the table */

static PyObject *Net_get_training_forwards(NetObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(self->net ? cnn_net_train_forward_count(self->net) : 0);
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

static PyObject *Net_get_loss_scale(NetObject *self, void *closure)
{
    (void)closure;
    PyObject *state = Net_get_loss_scale_state(self, NULL);
    if (!state || state == Py_None) return state;
    PyObject *scale = PyTuple_GET_ITEM(state, 0);
    Py_INCREF(scale);
    Py_DECREF(state);
    return scale;
}

static PyObject *Net_get_memory_bytes(NetObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromSize_t(self->net ? cnn_net_memory_bytes(self->net) : 0);
}

static cnn_status run_range_seconds(cnn_net *net, void *seconds)
{
    return cnn_net_range_seconds(net, seconds);
}

/* The engine's own measure of the last train_range (CUDA events on the GPU
 * engines; waits for the range to finish), or None. */
static PyObject *Net_get_last_range_seconds(NetObject *self, void *closure)
{
    (void)closure;
    double seconds = -1.0;
    if (net_call(self, run_range_seconds, &seconds)) return NULL;
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

/* plan(backward=False) -> the names of the steps a training step of fit
 * runs, in order (the Net's plan, made when it was created). */
static PyObject *Net_plan(NetObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"backward", NULL};
    int backward = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|p", kwlist, &backward) || !net_ready(self))
        return NULL;
    int n = cnn_net_plan_length(self->net, backward);
    PyObject *names = PyList_New(n);
    for (int i = 0; names && i < n; i++) {
        PyObject *name = PyUnicode_FromString(cnn_net_plan_step_name(self->net, backward, i));
        if (!name) {
            Py_CLEAR(names);
            break;
        }
        PyList_SET_ITEM(names, i, name);
    }
    return names;
}

/* layer_bytes() -> [(activation bytes, workspace bytes)] per engine layer. */
static PyObject *Net_layer_bytes(NetObject *self, PyObject *noargs)
{
    (void)noargs;
    if (!net_ready(self)) return NULL;
    int n = cnn_net_layer_count(self->net);
    PyObject *out = PyList_New(n);
    for (int i = 0; out && i < n; i++) {
        size_t activation, workspace;
        cnn_net_layer_bytes(self->net, i, &activation, &workspace);
        PyObject *row = Py_BuildValue("(nn)", (Py_ssize_t)activation, (Py_ssize_t)workspace);
        if (!row) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, row);
    }
    return out;
}

static PyMethodDef Net_methods[] = {
    {"layer_bytes", (PyCFunction)Net_layer_bytes, METH_NOARGS,
     "layer_bytes() -> [(activation bytes, workspace bytes)] of each engine layer at "
     "max_batch."},
    {"plan", (PyCFunction)(void (*)(void))Net_plan, METH_VARARGS | METH_KEYWORDS,
     "plan(backward=False) -> the names of the steps of fit's training step, in order."},
    {"train_batch", (PyCFunction)Net_train_batch, METH_VARARGS,
     "train_batch(x, y) -> (loss_sum, correct): one optimizer step on a batch."},
    {"profile", (PyCFunction)(void (*)(void))Net_profile, METH_VARARGS | METH_KEYWORDS,
     "profile(x, y, steps=10) -> [(step name, seconds per step)]: each planned step of a "
     "training step on the batch (x, y), and the optimizer update, timed over `steps` steps "
     "after one untimed (they train this network)."},
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
     "read_sums(reset=True) -> (loss_sum, correct) accumulated by train_range (with several "
     "outputs, correct is a float64 array of each output's loss sum and correct count; so "
     "for every call returning (loss_sum, correct))."},
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
    {"get_loss_scale_state", (PyCFunction)Net_get_loss_scale_state, METH_NOARGS,
     "get_loss_scale_state() -> (scale, good_steps) of dynamic loss scaling, or None."},
    {"set_loss_scale_state", (PyCFunction)Net_set_loss_scale_state, METH_O,
     "set_loss_scale_state((scale, good_steps)): dynamic loss scaling's state."},
    {"get_optimizer_state", (PyCFunction)Net_get_optimizer_state, METH_NOARGS,
     "get_optimizer_state() -> {'steps', 'training_forwards', 'slots'}."},
    {"set_optimizer_state", (PyCFunction)Net_set_optimizer_state, METH_O,
     "set_optimizer_state(state): all arrays are checked before any is written."},
    {"set_training_forwards", (PyCFunction)Net_set_training_forwards, METH_O,
     "set_training_forwards(n): the training-forward count (dropout masks), steps kept."},
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
    {"loss_scale", (getter)Net_get_loss_scale, NULL,
     "the dynamic loss scale of the next step (None without loss scaling)", NULL},
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
