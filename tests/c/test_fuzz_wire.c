/*
 * test_fuzz_wire.c - runs the libFuzzer target tests/fuzz/fuzz_wire.c over
 * 200k generated inputs (60k under AddressSanitizer), so every build (gcc, no
 * libFuzzer) exercises it, under the sanitizers in the sanitizer build.
 *
 * Inputs: random bytes; valid byte streams made by the real sender
 * (gsb__outmsg + gsb__wire_send into a socket pair: header, head, inline
 * arrays and CHUNK frames), some with their array descriptors edited
 * structurally before sending (bad dtypes, shapes, offsets, locations), then
 * mutated: bit flips, byte overwrites, truncation, appended garbage, header
 * length fields set to extremes.  The target aborts on any broken invariant;
 * this test then checks that the inputs reached every layer (so a generator
 * that stopped producing parseable frames fails here instead of silently
 * testing nothing).
 *
 *   test_fuzz_wire                 run (GSB_FUZZ_ITERS overrides the count)
 *   test_fuzz_wire --corpus DIR N  write N generated inputs as a libFuzzer seed corpus
 */
#include "../fuzz/fuzz_wire.c"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include "testing.h"

typedef struct {
    uint8_t *p;
    size_t n;
} bytes;

static int64_t rint_(int64_t lo, int64_t hi) /* [lo, hi] */
{
    return lo + (int64_t)(testing_uniform() * (double)(hi - lo + 1));
}

static double pool_data[1024];

/* A random array view into pool_data: C, F, strided, reversed, 1-D, scalar. */
static gsb_array random_view(void)
{
    static const gsb_dtype dts[] = {GSB_F32, GSB_F64, GSB_I32, GSB_I64};
    gsb_array a;
    memset(&a, 0, sizeof a);
    a.dtype = dts[rint_(0, 3)];
    int64_t isz = (int64_t)gsb_dtype_size(a.dtype);
    int64_t r = rint_(0, 8), c = rint_(0, 8);
    char *base = (char *)pool_data;
    switch (rint_(0, 5)) {
    case 0: /* C */
        a.ndim = 2;
        a.shape[0] = r;
        a.shape[1] = c;
        break;
    case 1: /* F */
        a.ndim = 2;
        a.shape[0] = r;
        a.shape[1] = c;
        a.strides[0] = isz;
        a.strides[1] = isz * r;
        break;
    case 2: /* every other column */
        a.ndim = 2;
        a.shape[0] = r;
        a.shape[1] = c;
        a.strides[0] = 2 * c * isz;
        a.strides[1] = 2 * isz;
        break;
    case 3: /* rows reversed */
        a.ndim = 2;
        a.shape[0] = r;
        a.shape[1] = c;
        a.strides[0] = -c * isz;
        a.strides[1] = isz;
        base += 512 * sizeof(double);
        break;
    case 4:
        a.ndim = 1;
        a.shape[0] = rint_(0, 40);
        a.strides[0] = rint_(0, 1) ? isz : -isz;
        base += 512 * sizeof(double);
        break;
    default:
        a.ndim = 0;
        break;
    }
    a.data = base;
    return a;
}

/* Edit one descriptor of the list so that it lies (or is merely unusual). */
static void mutate_descriptor(json_t *list, uint64_t inline_len)
{
    size_t n = json_array_size(list);
    if (n == 0)
        return;
    json_t *d = json_array_get(list, (size_t)rint_(0, (int64_t)n - 1));
    if (!json_is_object(d))
        return;
    static const char *dtypes[] = {"float32", "float64", "int32", "int64", "uint8", "int8", ""};
    static const char *ats[] = {"inline", "chunks", "shm", "data", "disk"};
    static const json_int_t extremes[] = {0, 1, 63, 64, -1, -64, (json_int_t)1 << 31,
                                          (json_int_t)1 << 40, (json_int_t)1 << 61,
                                          (json_int_t)1 << 62, INT64_MAX, INT64_MIN,
                                          INT64_MAX - 63};
    json_int_t ext = extremes[rint_(0, sizeof extremes / sizeof extremes[0] - 1)];
    switch (rint_(0, 9)) {
    case 0:
        json_object_set_new(d, "dtype", json_string(dtypes[rint_(0, 6)]));
        break;
    case 1:
        json_object_set_new(d, "at", json_string(ats[rint_(0, 4)]));
        break;
    case 2: /* an aligned offset near the end of the section */
        json_object_set_new(d, "offset",
                            json_integer((json_int_t)((inline_len / 64 + rint_(-2, 2)) * 64)));
        break;
    case 3:
        json_object_set_new(d, "offset", json_integer(ext));
        break;
    case 4: { /* a new shape */
        json_t *s = json_array();
        for (int k = (int)rint_(0, 3); k > 0; k--)
            json_array_append_new(s, json_integer(rint_(0, 3) ? rint_(0, 12) : ext));
        json_object_set_new(d, "shape", s);
        break;
    }
    case 5: { /* one dimension set to an extreme */
        json_t *s = json_object_get(d, "shape");
        if (json_array_size(s) > 0)
            json_array_set_new(s, (size_t)rint_(0, (int64_t)json_array_size(s) - 1),
                               json_integer(ext));
        break;
    }
    case 6: {
        static const char *keys[] = {"dtype", "shape", "at", "offset", "order"};
        json_object_del(d, keys[rint_(0, 4)]);
        break;
    }
    case 7:
        json_object_set_new(d, "order", json_string(rint_(0, 2) ? (rint_(0, 1) ? "F" : "C") : "Z"));
        break;
    case 8: /* a wrong JSON type */
        json_object_set_new(d, rint_(0, 1) ? "shape" : "offset",
                            rint_(0, 1) ? json_real(64.0) : json_string("64"));
        break;
    default:
        json_array_set_new(list, (size_t)rint_(0, (int64_t)n - 1),
                           rint_(0, 1) ? json_null() : json_integer(7));
        break;
    }
}

/* Everything readable on s now (the sender already wrote all of it). */
static bytes drain(int s, bytes acc)
{
    for (;;) {
        uint8_t tmp[4096];
        ssize_t r = recv(s, tmp, sizeof tmp, MSG_DONTWAIT);
        if (r <= 0)
            return acc;
        uint8_t *p = realloc(acc.p, acc.n + (size_t)r);
        if (!p)
            abort();
        memcpy(p + acc.n, tmp, (size_t)r);
        acc.p = p;
        acc.n += (size_t)r;
    }
}

/* 1 to 3 frames as the real sender writes them (CHUNK frames included). */
static bytes gen_valid(int edit)
{
    bytes out = {NULL, 0};
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    static const uint64_t max_inlines[] = {0, 64, 200, 512, 1 << 20};
    for (int fr = (int)rint_(1, 3); fr > 0; fr--) {
        gsb__outmsg m;
        gsb__outmsg_init(&m, max_inlines[rint_(0, 4)]);
        for (int k = (int)rint_(0, 5); k > 0; k--) {
            int kind = (int)rint_(0, 9);
            if (kind < 6) {
                gsb_array v = random_view();
                if (gsb__outmsg_add(&m, &v) != GSB_OK)
                    abort();
            } else if (kind == 6) {
                if (gsb__outmsg_add(&m, NULL) != GSB_OK)
                    abort();
            } else if (kind == 7) {
                if (gsb__outmsg_add_bytes(&m, pool_data, (size_t)rint_(0, 300)) != GSB_OK)
                    abort();
            } else {
                gsb__wire_array w = {kind == 8 ? GSB__AT_SHM : GSB__AT_DATA, GSB_F32, 2,
                                     {rint_(0, 9), rint_(0, 9)}, 0, (uint64_t)rint_(0, 9) * 64,
                                     (uint64_t)rint_(0, 3), (uint64_t)rint_(1, 5), 0};
                if (gsb__outmsg_add_placed(&m, &w) != GSB_OK)
                    abort();
            }
        }
        if (edit)
            mutate_descriptor(m.arrays, m.inline_len);
        json_t *head = json_pack("{s:s, s:i, s:s}", "op", "model.call", "model",
                                 (int)rint_(1, 3), "method", "predict");
        int type = rint_(0, 1) ? GSB__F_REQUEST : GSB__F_REPLY;
        if (gsb__wire_send(sv[0], (uint16_t)type, (uint64_t)rint_(1, 1000), head,
                           type == GSB__F_REQUEST ? "inputs" : "arrays", &m, -1) != GSB_OK)
            abort();
        json_decref(head);
        gsb__outmsg_clear(&m);
        out = drain(sv[1], out); /* keeps the socket buffer from filling up */
    }
    close(sv[0]);
    close(sv[1]);
    return out;
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void mutate(bytes *b)
{
    for (int k = (int)rint_(1, 3); k > 0; k--) {
        switch (rint_(0, 5)) {
        case 0:
            if (b->n)
                b->p[rint_(0, (int64_t)b->n - 1)] ^= (uint8_t)(1u << rint_(0, 7));
            break;
        case 1:
            if (b->n) {
                static const uint8_t vals[] = {0, 0xff, 0x7f, 0x80, '"', '{', '}', ',', '9'};
                b->p[rint_(0, (int64_t)b->n - 1)] =
                    rint_(0, 1) ? (uint8_t)rint_(0, 255) : vals[rint_(0, 8)];
            }
            break;
        case 2:
            b->n = (size_t)rint_(0, (int64_t)b->n);
            break;
        case 3: {
            size_t add = (size_t)rint_(1, 64);
            uint8_t *p = realloc(b->p, b->n + add);
            if (!p)
                abort();
            for (size_t i = 0; i < add; i++)
                p[b->n + i] = (uint8_t)rint_(0, 255);
            b->p = p;
            b->n += add;
            break;
        }
        case 4: /* the first frame's length */
            if (b->n >= 32) {
                uint64_t len = 0;
                for (int i = 7; i >= 0; i--)
                    len = len << 8 | b->p[16 + i];
                static const uint64_t ext[] = {0, 1, (uint64_t)64 << 20, ((uint64_t)64 << 20) + 1,
                                               (uint64_t)1 << 63, UINT64_MAX};
                uint64_t v = rint_(0, 1) ? ext[rint_(0, 5)] : len + (uint64_t)rint_(-3, 3);
                put_le(b->p + 16, v, 8);
            }
            break;
        default: /* the first frame's head_len */
            if (b->n >= 32) {
                uint32_t hl = (uint32_t)b->p[24] | (uint32_t)b->p[25] << 8 |
                              (uint32_t)b->p[26] << 16 | (uint32_t)b->p[27] << 24;
                static const uint32_t ext[] = {0, 1, 4u << 20, (4u << 20) + 1, UINT32_MAX};
                uint32_t v = rint_(0, 1) ? ext[rint_(0, 4)] : hl + (uint32_t)rint_(-3, 3);
                put_le(b->p + 24, v, 4);
            }
            break;
        }
    }
}

static bytes gen_random(void)
{
    bytes b;
    b.n = (size_t)rint_(0, 600);
    b.p = malloc(b.n ? b.n : 1);
    if (!b.p)
        abort();
    for (size_t i = 0; i < b.n; i++)
        b.p[i] = (uint8_t)rint_(0, 255);
    if (b.n >= 4 && rint_(0, 1))
        memcpy(b.p, "GSB1", 4);
    return b;
}

#define POOL 1500

static bytes copy_of(bytes b)
{
    bytes c = {malloc(b.n ? b.n : 1), b.n};
    if (!c.p)
        abort();
    if (b.n)
        memcpy(c.p, b.p, b.n);
    return c;
}

/* input number i of the deterministic sequence */
static bytes next_input(const bytes *pool, long i)
{
    int r = (int)(i % 10);
    if (r == 0)
        return gen_random();
    bytes b = copy_of(pool[rint_(0, POOL - 1)]);
    if (r >= 2) /* 1 in 10 unmutated */
        mutate(&b);
    return b;
}

static void make_pool(bytes *pool)
{
    testing_seed(20240505);
    for (int i = 0; i < 1024; i++)
        pool_data[i] = testing_normal();
    for (int i = 0; i < POOL; i++)
        pool[i] = gen_valid(i % 2); /* half with an edited descriptor */
}

static int write_corpus(const char *dir, long n)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        perror(dir);
        return 1;
    }
    static bytes pool[POOL];
    make_pool(pool);
    for (long i = 0; i < n; i++) {
        bytes b = i < POOL ? copy_of(pool[i]) : next_input(pool, i);
        char path[4096];
        snprintf(path, sizeof path, "%s/seed-%06ld", dir, i);
        FILE *f = fopen(path, "wb");
        if (!f || (b.n && fwrite(b.p, 1, b.n, f) != b.n) || fclose(f) != 0) {
            perror(path);
            return 1;
        }
        free(b.p);
    }
    for (int i = 0; i < POOL; i++)
        free(pool[i].p);
    return 0;
}

/* ASan/LSan make every allocation (jansson allocates per JSON value) several
 * times dearer: the sanitizer build runs fewer inputs to stay near 15 s */
#if defined(__SANITIZE_ADDRESS__)
static long iters = 60000;
#else
static long iters = 200000;
#endif

static void test_fuzz_target(void)
{
    static bytes pool[POOL];
    make_pool(pool);
    /* the unmutated pool, first: every frame must be received whole */
    uint64_t frames0 = fuzz_wire_stats.recv_frames;
    for (int i = 0; i < POOL; i += 2)
        LLVMFuzzerTestOneInput(pool[i].p, pool[i].n);
    CHECK(fuzz_wire_stats.recv_frames - frames0 >= POOL / 2); /* at least one frame each */

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < iters; i++) {
        bytes b = next_input(pool, i);
        LLVMFuzzerTestOneInput(b.p, b.n);
        free(b.p);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("     %ld inputs in %.2f s (%.0f/s): frames %llu, rejected %llu, arrays %llu "
           "(refused %llu), inline resolved %llu, received %llu, chunk sets %llu\n",
           iters, s, (double)iters / s, (unsigned long long)fuzz_wire_stats.frames,
           (unsigned long long)fuzz_wire_stats.rejected,
           (unsigned long long)fuzz_wire_stats.arrays,
           (unsigned long long)fuzz_wire_stats.bad_arrays,
           (unsigned long long)fuzz_wire_stats.resolved,
           (unsigned long long)fuzz_wire_stats.recv_frames,
           (unsigned long long)fuzz_wire_stats.chunk_sets);
    /* the inputs reached every layer, both accepted and refused */
    uint64_t n = (uint64_t)iters;
    CHECK(fuzz_wire_stats.frames > n / 2);
    CHECK(fuzz_wire_stats.rejected > n / 10);
    CHECK(fuzz_wire_stats.arrays > n / 2);
    CHECK(fuzz_wire_stats.bad_arrays > n / 50);
    CHECK(fuzz_wire_stats.resolved > n / 4);
    CHECK(fuzz_wire_stats.recv_frames > n / 4);
    CHECK(fuzz_wire_stats.chunk_sets > n / 100);
    for (int i = 0; i < POOL; i++)
        free(pool[i].p);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--corpus") == 0)
        return write_corpus(argv[2], atol(argv[3]));
    const char *e = getenv("GSB_FUZZ_ITERS");
    if (e && atol(e) > 0)
        iters = atol(e);
    RUN(test_fuzz_target);
    return testing_done();
}
