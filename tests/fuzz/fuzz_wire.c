/*
 * fuzz_wire.c - libFuzzer target for the frame layer (src/net/wire.c).
 *
 * One input is tried three ways:
 *   1. as is: the first 32 bytes decoded as a header, the rest as payload;
 *   2. with the header fixed up (magic, version, flags, type in range,
 *      length = the bytes that follow, head_len within it), so random bytes
 *      reach the JSON head parser and the array descriptors;
 *   3. as a byte stream on a socket (gsb__wire_recv then, for a frame that
 *      announces chunked arrays, gsb__wire_recv_chunks), like a receiver.
 * Every frame that parses has the array descriptors of head["arrays"] and
 * head["inputs"] parsed, written back and re-parsed (must be identical), and
 * every inline array resolved and read byte by byte, so AddressSanitizer
 * sees any access outside the inline section.  Invariant violations abort().
 *
 * Build with clang -fsanitize=fuzzer,address (cmake -DGSB_FUZZ=ON); the
 * ctest tests/c/test_fuzz_wire.c includes this file and drives it with
 * generated inputs so CI runs it without libFuzzer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/wire.h"

/* how far inputs got (the gcc driver checks that its inputs reach deep) */
static struct {
    uint64_t frames;      /* frames parsed (passes 1 and 2) */
    uint64_t rejected;    /* headers or frames refused */
    uint64_t arrays;      /* descriptors parsed */
    uint64_t bad_arrays;  /* descriptors refused */
    uint64_t resolved;    /* inline arrays resolved and read */
    uint64_t recv_frames; /* frames received from the socket (pass 3) */
    uint64_t chunk_sets;  /* chunked arrays received completely */
} fuzz_wire_stats;

static uint8_t fuzz_sink;

static void fuzz_read_bytes(const uint8_t *p, uint64_t n)
{
    uint8_t acc = 0;
    for (uint64_t i = 0; i < n; i++)
        acc ^= p[i];
    fuzz_sink ^= acc;
    __asm__ volatile("" : : "r"(acc) : "memory"); /* keep the reads */
}

static void fuzz_same_array(const gsb__wire_array *a, const gsb__wire_array *b)
{
    if (a->at != b->at || a->dtype != b->dtype || a->ndim != b->ndim ||
        a->shape[0] != b->shape[0] || a->shape[1] != b->shape[1] || a->fortran != b->fortran ||
        a->offset != b->offset || a->segment != b->segment || a->handle != b->handle ||
        a->nbytes != b->nbytes)
        abort();
}

/* One descriptor: parse, round trip, resolve and read its inline bytes. */
static void fuzz_one_array(const gsb__frame *f, const json_t *desc, gsb__wire_array *out)
{
    gsb__wire_array a;
    if (gsb__wire_array_parse(desc, &a) != GSB_OK) {
        fuzz_wire_stats.bad_arrays++;
        if (out)
            memset(out, 0, sizeof *out);
        return;
    }
    fuzz_wire_stats.arrays++;
    if (out)
        *out = a;
    json_t *j = gsb__wire_array_json(&a);
    if (!j)
        abort(); /* every parsed descriptor can be written back */
    gsb__wire_array b;
    if (gsb__wire_array_parse(j, &b) != GSB_OK)
        abort();
    json_decref(j);
    fuzz_same_array(&a, &b);
    if (a.at != GSB__AT_INLINE)
        return;
    const void *p;
    if (gsb__wire_inline_ptr(f, &a, &p) != GSB_OK)
        return;
    if (!p || (uintptr_t)p % GSB__WIRE_ALIGN != 0)
        abort();
    fuzz_wire_stats.resolved++;
    fuzz_read_bytes(p, a.nbytes);
    if (a.dtype == GSB__WIRE_U8 || a.nbytes == 0)
        return;
    /* the gsb_array view must stay inside the bytes too: read its last element */
    gsb_array v = gsb__wire_as_array(&a, (void *)p);
    int64_t isz = (int64_t)gsb__wire_itemsize(a.dtype);
    int64_t rows = v.ndim >= 1 ? v.shape[0] : 1, cols = v.ndim == 2 ? v.shape[1] : 1;
    int64_t s0, s1;
    if (v.strides[0] == 0 && v.strides[1] == 0) {
        s0 = cols * isz;
        s1 = isz;
    } else {
        s0 = v.strides[0];
        s1 = v.strides[1];
    }
    int64_t last = (rows - 1) * s0 + (cols - 1) * s1;
    if (last < 0 || (uint64_t)(last + isz) > a.nbytes)
        abort();
    fuzz_read_bytes((const uint8_t *)p + last, (uint64_t)isz);
}

/* The descriptors under head[key]: a list of them, or a single one. */
static void fuzz_arrays_of(const gsb__frame *f, const char *key)
{
    const json_t *list = json_object_get(f->head, key);
    if (!list)
        return;
    if (!json_is_array(list)) {
        fuzz_one_array(f, list, NULL);
        return;
    }
    for (size_t i = 0; i < json_array_size(list) && i < 64; i++)
        fuzz_one_array(f, json_array_get(list, i), NULL);
}

static void fuzz_frame(const gsb__frame_hdr *h, const uint8_t *payload)
{
    gsb__frame f;
    if (gsb__frame_parse(h, payload, &f) != GSB_OK) {
        fuzz_wire_stats.rejected++;
        if (f.head || f.body || f.fd != -1)
            abort(); /* a refused frame holds nothing */
        return;
    }
    fuzz_wire_stats.frames++;
    if (f.body_len != h->length - h->head_len || (f.body_len > 0) != (f.body != NULL) ||
        (f.body && (uintptr_t)f.body % GSB__WIRE_ALIGN != 0) ||
        (h->head_len > 0) != (f.head != NULL))
        abort();
    if (f.body && memcmp(f.body, payload + h->head_len, f.body_len) != 0)
        abort();
    fuzz_read_bytes(f.body, f.body_len);
    fuzz_arrays_of(&f, "arrays");
    fuzz_arrays_of(&f, "inputs");
    gsb__frame_clear(&f);
}

/* Pass 3: the bytes as a stream on a socket, read the way a receiver does.
 * One socket pair serves every input (creating one per input would be most
 * of the run time): both ends are non-blocking, so the reader hits EAGAIN
 * ("timed out", an I/O error like a closed peer) at the end of the input
 * instead of blocking, and whatever the reader left is drained afterwards. */
static int fuzz_sv[2] = {-1, -1};

static void fuzz_stream(const uint8_t *data, size_t size)
{
    /* the whole input must fit the socket buffer: we write before reading */
    if (size > 65536)
        return;
    if (fuzz_sv[0] < 0 &&
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fuzz_sv) != 0)
        abort();
    int sv[2] = {fuzz_sv[0], fuzz_sv[1]};
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(sv[0], data + off, size - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    for (int frame = 0; frame < 16; frame++) {
        gsb__frame f;
        if (gsb__wire_recv(sv[1], &f, (uint64_t)1 << 20, 0) != GSB_OK)
            break;
        fuzz_wire_stats.recv_frames++;
        /* chunked arrays follow the frame: receive them like the server */
        gsb__wire_array arrs[16];
        struct iovec dst[16];
        int n = 0;
        uint64_t total = 0;
        int ok = 1;
        const json_t *list = json_object_get(f.head, "arrays");
        if (!list)
            list = json_object_get(f.head, "inputs");
        for (size_t i = 0; json_is_array(list) && i < json_array_size(list) && i < 16; i++) {
            fuzz_one_array(&f, json_array_get(list, i), &arrs[n]);
            if (arrs[n].at == GSB__AT_CHUNKS) {
                total += arrs[n].nbytes;
                if (total > ((uint64_t)1 << 20))
                    ok = 0;
                n++;
            }
        }
        int rc = GSB_OK;
        if (ok && total > 0) {
            for (int i = 0; i < n; i++) {
                dst[i].iov_len = (size_t)arrs[i].nbytes;
                dst[i].iov_base = malloc(dst[i].iov_len ? dst[i].iov_len : 1);
                if (!dst[i].iov_base)
                    abort();
            }
            rc = gsb__wire_recv_chunks(sv[1], f.hdr.req_id, dst, n);
            if (rc == GSB_OK) {
                fuzz_wire_stats.chunk_sets++;
                for (int i = 0; i < n; i++)
                    fuzz_read_bytes(dst[i].iov_base, dst[i].iov_len);
            }
            for (int i = 0; i < n; i++)
                free(dst[i].iov_base);
        }
        gsb__frame_clear(&f);
        if (rc != GSB_OK || !ok)
            break;
    }
    uint8_t junk[4096];
    while (recv(sv[1], junk, sizeof junk, MSG_DONTWAIT) > 0)
        ;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gsb__frame_hdr h;
    /* 1: as is */
    if (size >= GSB__WIRE_HDR_SIZE) {
        if (gsb__hdr_decode(data, &h) == GSB_OK) {
            if (h.length <= size - GSB__WIRE_HDR_SIZE)
                fuzz_frame(&h, data + GSB__WIRE_HDR_SIZE);
        } else {
            fuzz_wire_stats.rejected++;
        }
    }

    /* 2: the header fixed up so the payload reaches the parser */
    uint8_t hb[GSB__WIRE_HDR_SIZE];
    memset(hb, 0, sizeof hb);
    memcpy(hb, data, size < sizeof hb ? size : sizeof hb);
    uint64_t length = size > GSB__WIRE_HDR_SIZE ? size - GSB__WIRE_HDR_SIZE : 0;
    uint32_t stored_hl = (uint32_t)hb[24] | (uint32_t)hb[25] << 8 | (uint32_t)hb[26] << 16 |
                         (uint32_t)hb[27] << 24;
    uint64_t req_id = 0;
    for (int i = 7; i >= 0; i--)
        req_id = (req_id << 8) | hb[8 + i];
    gsb__frame_hdr fix = {GSB__WIRE_VERSION, (uint16_t)(1 + hb[6] % 8), req_id, length,
                          (uint32_t)(stored_hl % (length + 1)), 0};
    uint8_t enc[GSB__WIRE_HDR_SIZE];
    gsb__hdr_encode(&fix, enc);
    if (gsb__hdr_decode(enc, &h) == GSB_OK) {
        if (h.version != fix.version || h.type != fix.type || h.req_id != fix.req_id ||
            h.length != fix.length || h.head_len != fix.head_len || h.flags != 0)
            abort(); /* encode/decode round trip */
        fuzz_frame(&h, data + (size > GSB__WIRE_HDR_SIZE ? GSB__WIRE_HDR_SIZE : size));
    } else {
        fuzz_wire_stats.rejected++;
    }

    /* 3: as a stream; inputs that do not start with the magic get the fixed
     * header, so the receive path sees frames too */
    if (size >= 4 && memcmp(data, "GSB1", 4) == 0) {
        fuzz_stream(data, size);
    } else if (size <= 65536) {
        uint8_t *s = malloc(GSB__WIRE_HDR_SIZE + (size_t)length);
        if (!s)
            abort();
        memcpy(s, enc, GSB__WIRE_HDR_SIZE);
        if (length)
            memcpy(s + GSB__WIRE_HDR_SIZE, data + GSB__WIRE_HDR_SIZE, (size_t)length);
        fuzz_stream(s, GSB__WIRE_HDR_SIZE + (size_t)length);
        free(s);
    }
    return 0;
}
