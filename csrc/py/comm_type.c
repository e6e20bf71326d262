/* comm_type.c: cnncuda._C.Comm, a communicator of a data-parallel group
 * (csrc/comm.h), for cnncuda.distribute.
 *
 *   Comm(rank, world, addr="127.0.0.1", port=0, timeout=300.0)
 *       a host communicator; rank 0 listens at once (.port tells where)
 *   .connect()            the rendezvous (blocks, the GIL released)
 *   .to_nccl(device)      a new Comm over NCCL on that CUDA device, made
 *                         through this one (which it then owns: this one
 *                         becomes unusable)
 *   .abort(why)           fails this rank's pending and later operations and
 *                         tells the peers; any thread, any time
 *   .rank, .world, .kind, .port
 *
 * A Net that joins a group (Net.set_comm) holds a reference to its Comm, so
 * the communicator outlives every use. */
#include "binding.h"

#include "../comm.h"

typedef struct {
    PyObject_HEAD
    cnn_comm *comm;
    int busy;  /* a blocking call runs with the GIL released */
    int users; /* Nets that joined a group through it (at most one) */
} CommObject;

static int Comm_init(CommObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"rank", "world", "addr", "port", "timeout", NULL};
    int rank, world, port = 0;
    const char *addr = "127.0.0.1";
    double timeout = 300.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "ii|sid", kwlist, &rank, &world, &addr, &port,
                                     &timeout))
        return -1;
    if (self->comm) {
        PyErr_SetString(PyExc_RuntimeError, "Comm.__init__ may be called only once");
        return -1;
    }
    cnn_comm *c = NULL;
    cnn_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cnn_comm_host_create(addr, port, rank, world, timeout, &c);
    Py_END_ALLOW_THREADS
    if (st != CNN_OK) {
        cnn_raise_status(st);
        return -1;
    }
    self->comm = c;
    return 0;
}

static void Comm_dealloc(CommObject *self)
{
    if (self->comm) {
        cnn_comm *c = self->comm;
        Py_BEGIN_ALLOW_THREADS
        c->destroy(c);
        Py_END_ALLOW_THREADS
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int usable(CommObject *self)
{
    if (!self->comm) {
        PyErr_SetString(PyExc_RuntimeError,
                        "this Comm was handed over to an NCCL communicator (or never made)");
        return 0;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "this Comm is already in a call on another thread");
        return 0;
    }
    return 1;
}

static PyObject *Comm_connect(CommObject *self, PyObject *noargs)
{
    (void)noargs;
    if (!usable(self)) return NULL;
    if (strcmp(self->comm->kind, "host") != 0) Py_RETURN_NONE;
    cnn_status st;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    st = cnn_comm_host_connect(self->comm);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (st != CNN_OK) return cnn_raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *Comm_to_nccl(CommObject *self, PyObject *args)
{
    int device;
    double timeout = 300.0;
    if (!PyArg_ParseTuple(args, "i|d", &device, &timeout)) return NULL;
    if (!usable(self)) return NULL;
    if (strcmp(self->comm->kind, "host") != 0) {
        PyErr_SetString(PyExc_ValueError, "to_nccl: expected a host communicator");
        return NULL;
    }
    if (self->users) {
        PyErr_SetString(PyExc_ValueError,
                        "to_nccl: this Comm carries a network's gradients; make the NCCL "
                        "communicator before the network joins the group");
        return NULL;
    }
    CommObject *out = PyObject_New(CommObject, Py_TYPE(self));
    if (!out) return NULL;
    out->comm = NULL;
    out->busy = 0;
    out->users = 0;
    cnn_comm *control = self->comm, *nccl = NULL;
    cnn_status st;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    st = cnn_comm_nccl_create(control, device, timeout, &nccl);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (st != CNN_OK) {
        Py_DECREF(out);
        return cnn_raise_status(st);
    }
    self->comm = NULL; /* the NCCL communicator owns it now */
    out->comm = nccl;
    return (PyObject *)out;
}

static PyObject *Comm_abort(CommObject *self, PyObject *args)
{
    const char *why = "aborted";
    if (!PyArg_ParseTuple(args, "|s", &why)) return NULL;
    if (self->comm) {
        cnn_comm *c = self->comm;
        /* thread-safe by contract: it may stop a call another thread runs */
        Py_BEGIN_ALLOW_THREADS
        c->abort(c, why);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static PyObject *Comm_get_rank(CommObject *self, void *closure)
{
    (void)closure;
    return self->comm ? PyLong_FromLong(self->comm->rank) : (usable(self), NULL);
}

static PyObject *Comm_get_world(CommObject *self, void *closure)
{
    (void)closure;
    return self->comm ? PyLong_FromLong(self->comm->world) : (usable(self), NULL);
}

static PyObject *Comm_get_kind(CommObject *self, void *closure)
{
    (void)closure;
    return self->comm ? PyUnicode_FromString(self->comm->kind) : (usable(self), NULL);
}

static PyObject *Comm_get_port(CommObject *self, void *closure)
{
    (void)closure;
    if (!self->comm) return usable(self), NULL;
    if (strcmp(self->comm->kind, "host") != 0) Py_RETURN_NONE;
    return PyLong_FromLong(cnn_comm_host_port(self->comm));
}

cnn_comm *cnn_comm_of(PyObject *obj)
{
    if (!PyObject_TypeCheck(obj, &cnn_CommType)) {
        PyErr_Format(PyExc_TypeError, "comm: expected a cnncuda._C.Comm or None, got %R", obj);
        return NULL;
    }
    CommObject *c = (CommObject *)obj;
    if (c->users) {
        PyErr_SetString(PyExc_ValueError,
                        "comm: this Comm already carries another network's gradients; each "
                        "replica needs a communicator of its own");
        return NULL;
    }
    return usable(c) ? c->comm : NULL;
}

void cnn_comm_use(PyObject *obj, int delta)
{
    if (obj) ((CommObject *)obj)->users += delta;
}

static PyObject *py_nccl_available(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyBool_FromLong(cnn_comm_nccl_available());
}

PyMethodDef cnn_comm_functions[] = {
    {"nccl_available", py_nccl_available, METH_NOARGS,
     "nccl_available() -> whether this build has NCCL (data parallel over GPUs)."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef Comm_methods[] = {
    {"connect", (PyCFunction)Comm_connect, METH_NOARGS,
     "connect(): the rendezvous of the group (blocks until every rank is there or the "
     "timeout)."},
    {"to_nccl", (PyCFunction)Comm_to_nccl, METH_VARARGS,
     "to_nccl(device, timeout=300.0) -> an NCCL Comm on that CUDA device, made through this "
     "connected host Comm (which it takes over)."},
    {"abort", (PyCFunction)Comm_abort, METH_VARARGS,
     "abort(why='aborted'): fail this rank's pending and later operations, and tell the "
     "peers."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Comm_getset[] = {
    {"rank", (getter)Comm_get_rank, NULL, "this rank", NULL},
    {"world", (getter)Comm_get_world, NULL, "the number of ranks", NULL},
    {"kind", (getter)Comm_get_kind, NULL, "'host' or 'nccl'", NULL},
    {"port", (getter)Comm_get_port, NULL, "the port rank 0 listens on (host)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject cnn_CommType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cnncuda._C.Comm",
    .tp_basicsize = sizeof(CommObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A communicator of a data-parallel group (host TCP or NCCL).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Comm_init,
    .tp_dealloc = (destructor)Comm_dealloc,
    .tp_methods = Comm_methods,
    .tp_getset = Comm_getset,
};
