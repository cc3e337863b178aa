/* The one internal transport interface. The executor packs a message (or a
 * slice of one) into staging, hands it to the transport, and unpacks what
 * arrives; a transport only moves bytes between ranks.
 *
 * send/recv post non-blocking operations matched by (sender, receiver,
 * tag); wait_all completes everything posted. A transport that can show the
 * receiver the sender's bytes in place (the in-process one) sets *data to
 * them; others receive into buf and set *data = buf. */
#ifndef RS_CORE_TRANSPORT_H
#define RS_CORE_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "../error.h"

typedef struct rsi_transport rsi_transport;

typedef struct rsi_transport_ops {
  const char *name;
  rs_status (*send)(rsi_transport *t, int from, int to, uint64_t tag,
                    const void *data, size_t bytes, rsi_err *err);
  rs_status (*recv)(rsi_transport *t, int to, int from, uint64_t tag,
                    void *buf, size_t bytes, const void **data, rsi_err *err);
  rs_status (*wait_all)(rsi_transport *t, int64_t timeout_ms, rsi_err *err);
  void (*destroy)(rsi_transport *t);
} rsi_transport_ops;

struct rsi_transport {
  const rsi_transport_ops *ops;
};

/* transport/local: every rank in this process. */
rs_status rsi_local_transport_create(rsi_transport **out);

#endif
