/* net_state.c: a Net's weights (Keras order and layouts), their gradients
 * and the optimizer's state, in and out. Setters check every array before
 * writing any, so a bad list leaves the network as it was. These calls are
 * short copies: they keep the GIL. */
#include "net_object.h"

#include <string.h>

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
    if (!net_ready(self)) return NULL;
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

PyObject *Net_get_weights(NetObject *self, PyObject *noargs)
{
    (void)noargs;
    return weight_list(self, 0);
}

PyObject *Net_get_gradients(NetObject *self, PyObject *noargs)
{
    (void)noargs;
    return weight_list(self, 1);
}

/* set_weights(list): every array is checked before any is written. */
PyObject *Net_set_weights(NetObject *self, PyObject *arg)
{
    if (!net_ready(self)) return NULL;
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
    if (!net_ready(self)) goto done; /* NumPy may have released the GIL while converting */
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
PyObject *Net_get_optimizer_state(NetObject *self, PyObject *noargs)
{
    (void)noargs;
    if (!net_ready(self)) return NULL;
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
    PyObject *state = Py_BuildValue("{s:l,s:l,s:N}", "steps", cnn_net_step_count(self->net),
                                    "training_forwards", cnn_net_train_forward_count(self->net),
                                    "slots", slots);
    if (state && cnn_net_loss_scaling(self->net)) {
        /* dynamic loss scaling: (the scale, the finite steps since it changed) */
        PyObject *scale = Net_get_loss_scale_state(self, NULL);
        if (!scale || PyDict_SetItemString(state, "loss_scale", scale) < 0) Py_CLEAR(state);
        Py_XDECREF(scale);
    }
    return state;
}

/* get_loss_scale_state() -> (scale, good_steps), or None without dynamic
 * loss scaling */
PyObject *Net_get_loss_scale_state(NetObject *self, PyObject *noargs)
{
    (void)noargs;
    if (!net_ready(self)) return NULL;
    if (!cnn_net_loss_scaling(self->net)) Py_RETURN_NONE;
    float scale;
    long good, growth;
    cnn_status st = cnn_net_loss_scale(self->net, &scale, &good, &growth);
    if (st != CNN_OK) return cnn_raise_status(st);
    return Py_BuildValue("(dl)", (double)scale, good);
}

/* set_loss_scale_state((scale, good_steps)): the state another network's
 * get_loss_scale_state gave (the growth count stays this network's) */
PyObject *Net_set_loss_scale_state(NetObject *self, PyObject *arg)
{
    if (!net_ready(self)) return NULL;
    double scale;
    long good;
    if (!PyArg_ParseTuple(arg, "dl;state: expected (scale, good_steps)", &scale, &good)) return NULL;
    if (!cnn_net_loss_scaling(self->net)) {
        PyErr_SetString(PyExc_ValueError,
                        "state: this network was built without dynamic loss scaling");
        return NULL;
    }
    float now;
    long now_good, growth;
    cnn_status st = cnn_net_loss_scale(self->net, &now, &now_good, &growth);
    if (st == CNN_OK) st = cnn_net_set_loss_scale(self->net, (float)scale, good, growth);
    if (st != CNN_OK) return cnn_raise_status(st);
    Py_RETURN_NONE;
}

/* set_optimizer_state(state): the dict get_optimizer_state gives; every
 * array is checked before anything is written. */
PyObject *Net_set_optimizer_state(NetObject *self, PyObject *state)
{
    if (!net_ready(self)) return NULL;
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
    if (!net_ready(self)) goto done; /* NumPy may have released the GIL while converting */
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
    PyObject *scale = PyDict_GetItemString(state, "loss_scale");
    if (scale && scale != Py_None && cnn_net_loss_scaling(self->net)) {
        PyObject *r = Net_set_loss_scale_state(self, scale);
        if (!r) goto done;
        Py_DECREF(r);
    }
    result = Py_None;
    Py_INCREF(result);
done:
    for (size_t k = 0; k < total; k++) Py_XDECREF(arrays[k]);
    PyMem_Free(arrays);
    return result;
}

/* set_training_forwards(n): the training-forward count (it keys the
 * dropout masks and augmentation draws), the step count and the optimizer's
 * arrays kept: a training forward run outside a step (the host metrics'
 * look at the step's outputs, cnncuda/training.py) taken back without the
 * round trip of the whole optimizer state. */
PyObject *Net_set_training_forwards(NetObject *self, PyObject *arg)
{
    if (!net_ready(self)) return NULL;
    long n = PyLong_Check(arg) && !PyBool_Check(arg) ? PyLong_AsLong(arg) : -1;
    if (n < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "n: expected an int >= 0, got %R", arg);
        return NULL;
    }
    cnn_status st = cnn_net_set_counters(self->net, cnn_net_step_count(self->net), n);
    if (st != CNN_OK) return cnn_raise_status(st);
    Py_RETURN_NONE;
}

/* set_optimizer(optimizer): the optimizer dict of the constructor (the
 * same kind); its hyperparameters apply from the next step on. */
PyObject *Net_set_optimizer(NetObject *self, PyObject *optimizer)
{
    if (!net_ready(self)) return NULL;
    cnn_optimizer_desc o;
    if (net_parse_optimizer(optimizer, &o) < 0) return NULL;
    cnn_status st = cnn_net_set_optimizer(self->net, &o);
    if (st != CNN_OK) return cnn_raise_status(st);
    Py_RETURN_NONE;
}

PyObject *Net_weight_info(NetObject *self, PyObject *noargs)
{
    (void)noargs;
    if (!net_ready(self)) return NULL;
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
