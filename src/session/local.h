/*
 * local.h - the engine in this process as a session (session.h): a session
 * URL of "local", "local?device=cpu|cuda|auto" or none (device from
 * $GSB_DEVICE, else auto), with "memory_cap=BYTES" after '?' or '&' (else
 * $GSB_GPU_MEMORY_CAP; core/budget.h).  A device set ("cuda:all",
 * "cuda:0,1", "cpu:N": multidev/devset.h) makes a multi-device session.
 * Not in the client-only build (GSB_CLIENT_ONLY), which has no engine.
 */
#ifndef GSB_SESSION_LOCAL_H
#define GSB_SESSION_LOCAL_H

#include "session/session.h"

extern const gsb__session_vtab gsb__local_session;

#endif
