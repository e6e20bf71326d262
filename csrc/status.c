/* status.c: the last-error message, one per thread (the binding releases the
 * GIL, so two models may fail at once on two threads). */
#include <stdarg.h>
#include <stdio.h>

#include "cnn.h"

static _Thread_local char last_error[512];

cnn_status cnn_set_error(cnn_status status, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, args);
    va_end(args);
    return status;
}

const char *cnn_last_error(void)
{
    return last_error[0] ? last_error : "unknown error";
}
