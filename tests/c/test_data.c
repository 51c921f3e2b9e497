/*
 * test_data.c - data handles (gsb_data_put) and the arena (gsb_arena_alloc)
 * on local sessions: a call on a handle equals the call on the array it came
 * from, whatever the layout; stale and foreign handles are clear errors.
 */
#include "testing.h"

#define N 200
#define D 5

static void fill(double *x, int n, unsigned seed)
{
    srand(seed);
    for (int i = 0; i < n; i++)
        x[i] = (double)rand() / RAND_MAX - 0.5;
}

static void fit_predict(gsb_session *s, const gsb_array *X, const gsb_array *y, double *pred)
{
    gsb_model *m = NULL;
    CHECK_OK(gsb_model_create(s, "LinearRegression", NULL, &m));
    CHECK_OK(gsb_model_fit(m, X, y));
    gsb_result *r = NULL;
    const gsb_array *in[1] = {X};
    CHECK_OK(gsb_model_call(m, "predict", in, 1, NULL, &r));
    const gsb_array *p = r ? gsb_result_array(r, 0) : NULL;
    CHECK(p && p->ndim == 1 && p->shape[0] == N);
    if (p)
        memcpy(pred, p->data, sizeof(double) * N);
    gsb_result_free(r);
    gsb_model_free(m);
}

static void test_handles_equal_arrays(void)
{
    gsb_session *s;
    CHECK_OK(gsb_open("local?device=cpu", &s));
    static double x[N * D], xf[N * D], y[N], want[N], got[N];
    fill(x, N * D, 1);
    fill(y, N, 2);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < D; j++)
            xf[j * N + i] = x[i * D + j];
    gsb_array X = gsb_array_2d(x, GSB_F64, N, D), Y = gsb_array_1d(y, GSB_F64, N);
    fit_predict(s, &X, &Y, want);

    /* C order, Fortran order, and strided (every other column of a wider array) */
    gsb_array XF = gsb_array_2d(xf, GSB_F64, N, D);
    XF.strides[0] = sizeof(double);
    XF.strides[1] = sizeof(double) * N;
    static double wide[N * D * 2];
    for (int i = 0; i < N; i++)
        for (int j = 0; j < D; j++)
            wide[i * 2 * D + 2 * j] = x[i * D + j];
    gsb_array XS = gsb_array_2d(wide, GSB_F64, N, D);
    XS.strides[0] = sizeof(double) * 2 * D;
    XS.strides[1] = sizeof(double) * 2;
    const gsb_array *layouts[3] = {&X, &XF, &XS};
    for (int l = 0; l < 3; l++) {
        gsb_data *dx = NULL, *dy = NULL;
        CHECK_OK(gsb_data_put(s, layouts[l], &dx));
        CHECK_OK(gsb_data_put(s, &Y, &dy));
        gsb_array hx = gsb_data_array(dx), hy = gsb_data_array(dy);
        CHECK(hx.ndim == 2 && hx.shape[0] == N && hx.shape[1] == D && hx.dtype == GSB_F64);
        fit_predict(s, &hx, &hy, got);
        CHECK(memcmp(got, want, sizeof want) == 0);
        gsb_data_free(dx);
        gsb_data_free(dy);
    }
    gsb_close(s);
}

static void test_bad_handles(void)
{
    gsb_session *s, *t;
    CHECK_OK(gsb_open("local?device=cpu", &s));
    CHECK_OK(gsb_open("local?device=cpu", &t));
    static double x[N * D], y[N];
    fill(x, N * D, 3);
    gsb_array X = gsb_array_2d(x, GSB_F64, N, D), Y = gsb_array_1d(y, GSB_F64, N);
    gsb_data *d = NULL;
    CHECK_OK(gsb_data_put(s, &X, &d));
    gsb_array ref = gsb_data_array(d);
    gsb_model *m = NULL;
    CHECK_OK(gsb_model_create(t, "LinearRegression", NULL, &m));
    CHECK_ERR(gsb_model_fit(m, &ref, &Y), GSB_EINVAL, "another session");
    gsb_data *not_made = NULL;
    CHECK_ERR(gsb_data_put(s, &ref, &not_made), GSB_EINVAL, "already a data handle");
    gsb_data *d2 = NULL;
    CHECK_OK(gsb_data_put(t, &X, &d2));
    gsb_array ref2 = gsb_data_array(d2);
    gsb_data_free(d2);
    CHECK_ERR(gsb_model_fit(m, &ref2, &Y), GSB_EINVAL, "freed");
    gsb_array bad = gsb_array_2d(x, (gsb_dtype)99, N, D);
    CHECK_ERR(gsb_data_put(s, &bad, &d2), GSB_EINVAL, "dtype");
    /* NaN is caught by the call that uses the data, in scikit-learn's words */
    x[7] = NAN;
    CHECK_OK(gsb_data_put(t, &X, &d2));
    ref2 = gsb_data_array(d2);
    CHECK_ERR(gsb_model_fit(m, &ref2, &Y), GSB_EINVAL, "Input X contains NaN");
    gsb_data_free(d2);
    gsb_model_free(m);
    gsb_close(s); /* d keeps s alive: freeing it after the close is safe ... */
    gsb_close(t);
    gsb_data_free(d); /* ... and releases s */
}

static void test_arena(void)
{
    gsb_session *s;
    CHECK_OK(gsb_open(NULL, &s));
    void *p = NULL, *q = NULL;
    CHECK_OK(gsb_arena_alloc(s, 3 << 20, &p));
    CHECK_OK(gsb_arena_alloc(s, 100, &q));
    CHECK(p && ((uintptr_t)p % 64) == 0 && q && ((uintptr_t)q % 64) == 0);
    if (p && q) {
        memset(p, 1, 3 << 20);
        double *x = q;
        for (int i = 0; i < 12; i++)
            x[i] = i % 3 + (i / 3) * 0.5;
        gsb_array X = gsb_array_2d(x, GSB_F64, 4, 3);
        gsb_model *m = NULL;
        CHECK_OK(gsb_model_create(s, "StandardScaler", NULL, &m));
        CHECK_OK(gsb_model_fit(m, &X, NULL));
        gsb_model_free(m);
    }
    static char not_arena[16];
    gsb_arena_free(s, not_arena); /* not arena memory: ignored, no crash */
    gsb_arena_free(s, p);
    gsb_model *late = NULL;
    CHECK_OK(gsb_model_create(s, "KMeans", NULL, &late));
    gsb_close(s);         /* the caller's reference; q and late keep the session */
    gsb_model_free(late); /* after the close, as a garbage collector may */
    gsb_arena_free(s, q); /* the last reference: the session goes */
}

int main(void)
{
    RUN(test_handles_equal_arrays);
    RUN(test_bad_handles);
    RUN(test_arena);
    return testing_done();
}
