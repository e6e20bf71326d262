/* net_run.c: the Net's methods that run the network: a batch (train_batch,
 * compute_gradients, apply_gradients, forward, backward), whole arrays the
 * core converts as it uploads them (evaluate, predict, set_data,
 * set_validation), fit's resident steps (set_order, train_range, read_sums,
 * evaluate_validation) and the data-parallel group (set_comm, reduce_sums).
 * Each checks its arguments, then makes its core call through net_call
 * (net_type.c), which releases the GIL around it. */
#include "net_object.h"

#include "../comm.h"

/* ------------------------------------------------ a batch and its loss */

/* A call's sums: (loss_sum, correct), or for a network of several outputs
 * (loss_sum, parts), parts a float64 array of each output's loss sum and
 * correct count in turn (cnn_net_part_sums; loss_sum the weighted sum). */
static PyObject *sums_result(NetObject *self, double loss, double correct)
{
    const int parts = cnn_net_part_count(self->net);
    if (!parts) return Py_BuildValue("(dd)", loss, correct);
    npy_intp dims[1] = {2 * parts};
    PyArrayObject *a = (PyArrayObject *)PyArray_SimpleNew(1, dims, NPY_FLOAT64);
    if (!a) return NULL;
    cnn_net_part_sums(self->net, PyArray_DATA(a));
    return Py_BuildValue("(dN)", loss, a);
}

typedef struct {
    int training; /* train_batch: a step; else compute_gradients */
    int n;
    const float *x;
    const int32_t *labels;
    const float *targets;
    float loss, correct;
} loss_args;

static cnn_status run_loss(cnn_net *net, void *p)
{
    loss_args *a = p;
    return a->training ? cnn_net_train_batch(net, a->n, a->x, a->labels, a->targets, &a->loss,
                                             &a->correct)
                       : cnn_net_compute_gradients(net, a->n, a->x, a->labels, a->targets,
                                                   &a->loss, &a->correct);
}

static PyObject *loss_call(NetObject *self, PyObject *args, int training)
{
    PyObject *xo, *yo;
    if (!PyArg_ParseTuple(args, "OO", &xo, &yo) || !net_ready(self)) return NULL;
    PyArrayObject *x = net_input_array(self, xo, cnn_net_max_batch(self->net));
    if (!x) return NULL;
    PyArrayObject *labels, *targets;
    loss_args a = {.training = training, .n = (int)PyArray_DIMS(x)[0], .x = PyArray_DATA(x)};
    if (net_target_arrays(self, yo, a.n, &labels, &targets) < 0) {
        Py_DECREF(x);
        return NULL;
    }
    a.labels = labels ? PyArray_DATA(labels) : NULL;
    a.targets = targets ? PyArray_DATA(targets) : NULL;
    int failed = net_call(self, run_loss, &a);
    Py_DECREF(x);
    Py_XDECREF(labels);
    Py_XDECREF(targets);
    if (failed) return NULL;
    return sums_result(self, (double)a.loss, (double)a.correct);
}

PyObject *Net_train_batch(NetObject *self, PyObject *args)
{
    return loss_call(self, args, 1);
}

PyObject *Net_compute_gradients(NetObject *self, PyObject *args)
{
    return loss_call(self, args, 0);
}

/* ------------------------------------------------ a profiled step */

#define PROFILE_ROOM 1024

typedef struct {
    loss_args batch;
    int steps, count;
    double seconds[PROFILE_ROOM];
    const char *names[PROFILE_ROOM];
} profile_args;

static cnn_status run_profile(cnn_net *net, void *p)
{
    profile_args *a = p;
    return cnn_net_profile(net, a->batch.n, a->batch.x, a->batch.labels, a->batch.targets,
                           a->steps, a->seconds, a->names, PROFILE_ROOM, &a->count);
}

/* profile(x, y, steps=10) -> [(step name, seconds per step)]: the planned
 * steps of a training step and the optimizer update, timed (the steps
 * train this network). */
PyObject *Net_profile(NetObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"x", "y", "steps", NULL};
    PyObject *xo, *yo;
    int steps = 10;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|i", kwlist, &xo, &yo, &steps) ||
        !net_ready(self))
        return NULL;
    if (steps < 1) {
        PyErr_Format(PyExc_ValueError, "steps: expected at least 1, got %d", steps);
        return NULL;
    }
    profile_args *a = PyMem_Calloc(1, sizeof *a);
    if (!a) return PyErr_NoMemory();
    PyArrayObject *x = net_input_array(self, xo, cnn_net_max_batch(self->net));
    PyArrayObject *labels = NULL, *targets = NULL;
    PyObject *out = NULL;
    if (!x) goto done;
    a->steps = steps;
    a->batch.n = (int)PyArray_DIMS(x)[0];
    a->batch.x = PyArray_DATA(x);
    if (net_target_arrays(self, yo, a->batch.n, &labels, &targets) < 0) goto done;
    a->batch.labels = labels ? PyArray_DATA(labels) : NULL;
    a->batch.targets = targets ? PyArray_DATA(targets) : NULL;
    if (net_call(self, run_profile, a)) goto done;
    out = PyList_New(a->count);
    for (int k = 0; out && k < a->count; k++) {
        PyObject *row = Py_BuildValue("(sd)", a->names[k], a->seconds[k]);
        if (!row) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, k, row);
    }
done:
    Py_XDECREF(x);
    Py_XDECREF(labels);
    Py_XDECREF(targets);
    PyMem_Free(a);
    return out;
}

static cnn_status run_apply_gradients(cnn_net *net, void *p)
{
    (void)p;
    return cnn_net_apply_gradients(net);
}

PyObject *Net_apply_gradients(NetObject *self, PyObject *noargs)
{
    (void)noargs;
    if (net_call(self, run_apply_gradients, NULL)) return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------- whole arrays of samples */

/* evaluate, set_data (fit's training set) and set_validation (fit's
 * validation set): samples the core converts and checks as it uploads them,
 * and their targets. */
typedef enum { EVALUATE, SET_DATA, SET_VALIDATION } rows_kind;

typedef struct {
    rows_kind kind;
    long n;
    const cnn_host_array *host;
    const int32_t *labels;
    const float *targets;
    double loss, correct;
} rows_args;

static cnn_status run_rows(cnn_net *net, void *p)
{
    rows_args *a = p;
    if (a->kind == EVALUATE)
        return cnn_net_evaluate(net, a->n, a->host, a->labels, a->targets, &a->loss,
                                &a->correct);
    if (a->kind == SET_DATA) return cnn_net_set_data(net, a->n, a->host, a->labels, a->targets);
    return cnn_net_set_validation(net, a->n, a->host, a->labels, a->targets);
}

static PyObject *rows_call(NetObject *self, PyObject *args, PyObject *kwds, rows_kind kind)
{
    static char *kwlist[] = {"x", "y", "x_arg", "x_index0", NULL};
    PyObject *xo, *yo;
    const char *x_arg = "x";
    Py_ssize_t index0 = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|sn", kwlist, &xo, &yo, &x_arg, &index0) ||
        !net_ready(self))
        return NULL;
    cnn_host_array host;
    PyArrayObject *x = net_sample_array(self, xo, x_arg, index0, &host);
    if (!x) return NULL;
    rows_args a = {.kind = kind, .n = (long)PyArray_DIMS(x)[0], .host = &host};
    PyArrayObject *labels, *targets;
    if (net_target_arrays(self, yo, a.n, &labels, &targets) < 0) {
        Py_DECREF(x);
        return NULL;
    }
    a.labels = labels ? PyArray_DATA(labels) : NULL;
    a.targets = targets ? PyArray_DATA(targets) : NULL;
    if (kind == SET_DATA) self->data_n = 0; /* the core drops the old data first */
    int failed = net_call(self, run_rows, &a);
    Py_DECREF(x);
    Py_XDECREF(labels);
    Py_XDECREF(targets);
    if (failed) return NULL;
    if (kind == EVALUATE) return sums_result(self, a.loss, a.correct);
    if (kind == SET_DATA) self->data_n = a.n;
    Py_RETURN_NONE;
}

PyObject *Net_evaluate(NetObject *self, PyObject *args, PyObject *kwds)
{
    return rows_call(self, args, kwds, EVALUATE);
}

/* set_data(x, y, x_arg="x", x_index0=0): the training set, uploaded once. */
PyObject *Net_set_data(NetObject *self, PyObject *args, PyObject *kwds)
{
    return rows_call(self, args, kwds, SET_DATA);
}

static cnn_status run_drop_validation(cnn_net *net, void *p)
{
    (void)p;
    return cnn_net_set_validation(net, 0, NULL, NULL, NULL);
}

/* set_validation(x, y, x_arg="x", x_index0=0), or set_validation(None, None) to drop it */
PyObject *Net_set_validation(NetObject *self, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) == 2 && PyTuple_GET_ITEM(args, 0) == Py_None &&
        PyTuple_GET_ITEM(args, 1) == Py_None && (!kwds || !PyDict_Size(kwds))) {
        if (net_call(self, run_drop_validation, NULL)) return NULL;
        Py_RETURN_NONE;
    }
    return rows_call(self, args, kwds, SET_VALIDATION);
}

typedef struct {
    double loss, correct;
} sums_args;

static cnn_status run_evaluate_validation(cnn_net *net, void *p)
{
    sums_args *a = p;
    return cnn_net_evaluate_validation(net, &a->loss, &a->correct);
}

PyObject *Net_evaluate_validation(NetObject *self, PyObject *noargs)
{
    (void)noargs;
    sums_args a = {0.0, 0.0};
    if (net_call(self, run_evaluate_validation, &a)) return NULL;
    return sums_result(self, a.loss, a.correct);
}

/* --------------------------------------------------- forward, predict */

typedef struct {
    int training;
    long n;
    const float *x;                /* forward: a batch of float32 samples */
    const cnn_host_array *host;    /* predict: any number, converted by the core */
    float *y;
} output_args;

static cnn_status run_output(cnn_net *net, void *p)
{
    output_args *a = p;
    if (a->host) return cnn_net_predict(net, a->n, a->host, a->y);
    return cnn_net_forward(net, (int)a->n, a->x, a->training, a->y);
}

/* The call of forward and predict: y (a new output array for a->n samples)
 * filled by the core, or NULL; x is released either way. */
static PyObject *output_call(NetObject *self, PyArrayObject *x, output_args *a)
{
    PyObject *y = net_new_output(self, a->n);
    if (y) {
        a->y = PyArray_DATA((PyArrayObject *)y);
        if (net_call(self, run_output, a)) Py_CLEAR(y);
    }
    Py_DECREF(x);
    return y;
}

PyObject *Net_forward(NetObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"x", "training", NULL};
    PyObject *xo;
    int training = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|p", kwlist, &xo, &training) ||
        !net_ready(self))
        return NULL;
    PyArrayObject *x = net_input_array(self, xo, cnn_net_max_batch(self->net));
    if (!x) return NULL;
    output_args a = {.training = training, .n = (long)PyArray_DIMS(x)[0], .x = PyArray_DATA(x)};
    return output_call(self, x, &a);
}

/* predict(x, x_arg="x", x_index0=0): outputs of any number of samples, which
 * the core converts and checks as it uploads them. */
PyObject *Net_predict(NetObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"x", "x_arg", "x_index0", NULL};
    PyObject *xo;
    const char *x_arg = "x";
    Py_ssize_t index0 = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|sn", kwlist, &xo, &x_arg, &index0) ||
        !net_ready(self))
        return NULL;
    cnn_host_array host;
    PyArrayObject *x = net_sample_array(self, xo, x_arg, index0, &host);
    if (!x) return NULL;
    output_args a = {.n = (long)PyArray_DIMS(x)[0], .host = &host};
    return output_call(self, x, &a);
}

typedef struct {
    int n;
    const float *dy;
    float *dx;
} backward_args;

static cnn_status run_backward(cnn_net *net, void *p)
{
    backward_args *a = p;
    return cnn_net_backward(net, a->n, a->dy, a->dx);
}

/* backward(dy) -> dx, for the last training forward. */
PyObject *Net_backward(NetObject *self, PyObject *args)
{
    PyObject *dyo;
    if (!PyArg_ParseTuple(args, "O", &dyo) || !net_ready(self)) return NULL;
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
    if (dx) {
        backward_args a = {(int)n, PyArray_DATA(dy), PyArray_DATA((PyArrayObject *)dx)};
        if (net_call(self, run_backward, &a)) Py_CLEAR(dx);
    }
    Py_DECREF(dy);
    return dx;
}

/* -------------------------------------------------- fit's resident steps */

/* set_order(order): an epoch's sample order, n indices into the data. */
PyObject *Net_set_order(NetObject *self, PyObject *arg)
{
    if (!net_ready(self)) return NULL;
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
    /* a short copy, with the GIL kept; NumPy may have released it while
     * converting, so the Net is asked again */
    if (!net_ready(self)) {
        Py_DECREF(o32);
        return NULL;
    }
    cnn_status st = cnn_net_set_order(self->net, dst);
    Py_DECREF(o32);
    if (st != CNN_OK) return cnn_raise_status(st);
    Py_RETURN_NONE;
}

typedef struct {
    long start, count;
    int batch;
} range_args;

static cnn_status run_train_range(cnn_net *net, void *p)
{
    range_args *a = p;
    return cnn_net_train_range(net, a->start, a->count, a->batch);
}

/* train_range(start, count, batch): steps over order[start, start + count). */
PyObject *Net_train_range(NetObject *self, PyObject *args)
{
    range_args a;
    if (!PyArg_ParseTuple(args, "lli", &a.start, &a.count, &a.batch) ||
        net_call(self, run_train_range, &a))
        return NULL;
    Py_RETURN_NONE;
}

typedef struct {
    int reset;
    double loss, correct;
} read_args;

static cnn_status run_read_sums(cnn_net *net, void *p)
{
    read_args *a = p;
    return cnn_net_read_sums(net, a->reset, &a->loss, &a->correct);
}

/* read_sums(reset=True) -> (loss_sum, correct) of train_range since the last reset. */
PyObject *Net_read_sums(NetObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"reset", NULL};
    read_args a = {.reset = 1};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|p", kwlist, &a.reset) ||
        net_call(self, run_read_sums, &a))
        return NULL;
    return sums_result(self, a.loss, a.correct);
}

/* ------------------------------------------------ the data-parallel group */

static cnn_status run_set_comm(cnn_net *net, void *comm)
{
    return cnn_net_set_comm(net, comm);
}

/* set_comm(comm or None): joins (or leaves) a data-parallel group: a
 * collective call, which every rank of the group makes. */
PyObject *Net_set_comm(NetObject *self, PyObject *arg)
{
    if (arg != Py_None && arg == self->comm) Py_RETURN_NONE; /* already in this group */
    cnn_comm *comm = NULL;
    if (arg != Py_None && !(comm = cnn_comm_of(arg))) return NULL;
    if (!net_ready(self)) return NULL;
    /* counted before the GIL is released: no other Net may join through it */
    PyObject *joining = arg == Py_None ? NULL : arg;
    cnn_comm_use(joining, +1);
    cnn_status st;
    if (net_call_status(self, run_set_comm, comm, &st)) {
        cnn_comm_use(joining, -1);
        return NULL;
    }
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

static cnn_status run_reduce_sums(cnn_net *net, void *p)
{
    (void)p;
    return cnn_net_reduce_sums(net);
}

/* reduce_sums(): train_range's running sums summed over the group (collective). */
PyObject *Net_reduce_sums(NetObject *self, PyObject *noargs)
{
    (void)noargs;
    if (net_call(self, run_reduce_sums, NULL)) return NULL;
    Py_RETURN_NONE;
}
