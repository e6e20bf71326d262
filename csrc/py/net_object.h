/* net_object.h: the Net type's object and the pieces its files share.
 *
 *   net_type.c    the type: lifetime, the live list, ready/claim and the call
 *                 helper, the getters, the method table
 *   net_spec.c    Net(...)'s arguments -> cnn_net_spec (layers, loss, optimizer)
 *   net_arrays.c  the array arguments checked against the network's shapes
 *   net_run.c     the methods that run the network (train, evaluate, predict, data)
 *   net_state.c   weights and optimizer state in and out
 */
#ifndef CNN_PY_NET_OBJECT_H
#define CNN_PY_NET_OBJECT_H

#include "binding.h"

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
    int n_classes;        /* the output width k (the last axis); with several
                             outputs the packed target row's width */
    int positions;        /* the loss's rows per sample (an image output's h w) */
    int loss_weighted;    /* target rows of k + 1: the targets, then the sample's weight */
    int busy;             /* a core call is running with the GIL released */
    long data_n;          /* samples uploaded by set_data */
    PyObject *comm;       /* the Comm of its data-parallel group, or NULL */
} NetObject;

/* net_type.c */
/* Whether the Net can take a call now: its network exists, no call runs on
 * another thread, and its GPU (if any) is this thread's current device;
 * else 0 with RuntimeError (or the device's error) set. */
int net_ready(NetObject *self);
/* A core call with the GIL released: fn(net, args). */
typedef cnn_status (*net_core_fn)(cnn_net *net, void *args);
/* The one sequence of every call that releases the GIL: net_ready() again
 * (NumPy may release the GIL while a method converts its arguments, and
 * another thread may have started a call meanwhile), the Net marked busy,
 * the GIL released around fn, busy cleared. -1 with an exception set when
 * the Net is not ready; else 0 with the core's status in *st, not raised
 * (set_comm undoes its bookkeeping first). */
int net_call_status(NetObject *self, net_core_fn fn, void *args, cnn_status *st);
/* net_call_status, the status raised: 0, or -1 with an exception set. */
int net_call(NetObject *self, net_core_fn fn, void *args);

/* net_spec.c */
/* The network Net(...) describes: layers (a list of dicts), input_shape,
 * loss and optimizer dicts into *spec, its layers into *layers (PyMem; the
 * caller frees them), the input's dims into dims[3] and *rank (3 or 1).
 * 0, or -1 with an exception naming the argument. */
int net_spec_parse(PyObject *layers, PyObject *input_shape, PyObject *loss,
                   PyObject *optimizer, cnn_net_spec *spec, cnn_layer_spec **layer_specs,
                   long dims[3], Py_ssize_t *rank);
/* An optimizer dict ({"kind": "adam" | "sgd", hyperparameters}) -> *o. */
int net_parse_optimizer(PyObject *d, cnn_optimizer_desc *o);

/* net_arrays.c: each returns a new reference, or NULL with an exception
 * naming the argument */
/* x as float32 of shape (n, *input_shape), 1 <= n (<= limit when > 0),
 * converted and checked as the core converts set_data's samples. */
PyArrayObject *net_input_array(NetObject *self, PyObject *obj, long limit);
/* x as samples of shape (n, *input_shape), n >= 1, for the core to convert
 * and check as it uploads them (host filled in; errors name `arg` and count
 * flat indices from index0). */
PyArrayObject *net_sample_array(NetObject *self, PyObject *obj, const char *arg,
                                Py_ssize_t index0, cnn_host_array *host);
/* Targets of n samples: *labels (int32) for sparse losses, *targets
 * (float32 (n, k)) otherwise, the other NULL; 0, or -1 with an exception. */
int net_target_arrays(NetObject *self, PyObject *obj, npy_intp n, PyArrayObject **labels,
                      PyArrayObject **targets);
/* A new float32 array for n outputs. */
PyObject *net_new_output(NetObject *self, npy_intp n);

/* net_run.c and net_state.c: the methods */
PyObject *Net_train_batch(NetObject *self, PyObject *args);
PyObject *Net_compute_gradients(NetObject *self, PyObject *args);
PyObject *Net_profile(NetObject *self, PyObject *args, PyObject *kwds);
PyObject *Net_apply_gradients(NetObject *self, PyObject *noargs);
PyObject *Net_evaluate(NetObject *self, PyObject *args, PyObject *kwds);
PyObject *Net_forward(NetObject *self, PyObject *args, PyObject *kwds);
PyObject *Net_backward(NetObject *self, PyObject *args);
PyObject *Net_predict(NetObject *self, PyObject *args, PyObject *kwds);
PyObject *Net_set_data(NetObject *self, PyObject *args, PyObject *kwds);
PyObject *Net_set_validation(NetObject *self, PyObject *args, PyObject *kwds);
PyObject *Net_evaluate_validation(NetObject *self, PyObject *noargs);
PyObject *Net_set_order(NetObject *self, PyObject *arg);
PyObject *Net_train_range(NetObject *self, PyObject *args);
PyObject *Net_read_sums(NetObject *self, PyObject *args, PyObject *kwds);
PyObject *Net_set_comm(NetObject *self, PyObject *arg);
PyObject *Net_reduce_sums(NetObject *self, PyObject *noargs);
PyObject *Net_get_weights(NetObject *self, PyObject *noargs);
PyObject *Net_get_gradients(NetObject *self, PyObject *noargs);
PyObject *Net_set_weights(NetObject *self, PyObject *arg);
PyObject *Net_get_optimizer_state(NetObject *self, PyObject *noargs);
PyObject *Net_get_loss_scale_state(NetObject *self, PyObject *noargs);
PyObject *Net_set_loss_scale_state(NetObject *self, PyObject *arg);
PyObject *Net_set_optimizer_state(NetObject *self, PyObject *state);
PyObject *Net_set_training_forwards(NetObject *self, PyObject *arg);
PyObject *Net_set_optimizer(NetObject *self, PyObject *optimizer);
PyObject *Net_weight_info(NetObject *self, PyObject *noargs);

#endif
