/* The block row by row through the one-sample evaluator. */
static void rdk_scalar_rows(const rdk_block *b)
{
    const double *row_in[RDK_MAX_ARGS];
    double *row_out[RDK_MAX_ARGS];
    for (npy_intp r = b->begin; r < b->end; r++) {
        for (int k = 0; k < b->nin; k++) row_in[k] = b->in[k] + r * b->in_size[k];
        for (int k = 0; k < b->nout; k++) row_out[k] = b->out[k] + r * b->out_size[k];
        b->eval(row_in, row_out);
    }
}

static void *rdk_run_block(void *arg)
{
    const rdk_block *b = (const rdk_block *)arg;
    if (b->rows != NULL) b->rows(b);
    else rdk_scalar_rows(b);
    return NULL;
}

/* 32-byte aligned scratch of `bytes` bytes, zero-filled (NULL when out of memory). */
static void *rdk_alloc(size_t bytes)
{
    bytes = (bytes + 31) / 32 * 32;
    void *p = aligned_alloc(32, bytes > 0 ? bytes : 32);
    if (p != NULL) memset(p, 0, bytes);
    return p;
}

/* dst[0..n) = src[0..n); with `stream`, by non-temporal stores that bypass the caches (no read of the
   destination lines, no eviction of the working set); rdk_stream_fence() orders them. */
static void rdk_copy_row(double *dst, const double *src, npy_intp n, int stream)
{
#ifdef __AVX__
    if (stream) {
        npy_intp j = 0;
        for (; j < n && ((size_t)(dst + j) & 31) != 0; j++) dst[j] = src[j];
        for (; j + 4 <= n; j += 4) _mm256_stream_pd(dst + j, _mm256_loadu_pd(src + j));
        for (; j < n; j++) dst[j] = src[j];
        return;
    }
#endif
    memcpy(dst, src, (size_t)n * sizeof(double));
}

static void rdk_stream_fence(void)
{
#ifdef __AVX__
    _mm_sfence();
#endif
}

/* Threads when the caller does not say: $ROBODYN_THREADS, else the CPUs of this process's affinity mask. */
static int rdk_default_threads(void)
{
    const char *env = getenv("ROBODYN_THREADS");
    int n = 0;
    if (env != NULL && *env) n = atoi(env);
    if (n < 1) {
#ifdef CPU_COUNT
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
#endif
        if (n < 1) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    }
    if (n < 1) n = 1;
    return n > RDK_MAX_THREADS ? RDK_MAX_THREADS : n;
}

/* All rows of *proto, split into contiguous blocks over up to `threads` threads (the calling one
   included), at least `min_rows` rows per block, block bounds on multiples of proto->group. A thread that cannot be created has its block run by
   the caller. Called without the GIL. */
static void rdk_parallel_rows(const rdk_block *proto, npy_intp rows, int threads, npy_intp min_rows)
{
    rdk_block blocks[RDK_MAX_THREADS];
    pthread_t tid[RDK_MAX_THREADS];
    int started[RDK_MAX_THREADS] = {0};
    npy_intp most = rows / (min_rows > 0 ? min_rows : 1);
    npy_intp group = proto->group > 1 ? proto->group : 1, units = (rows + group - 1) / group;
    if (threads > most) threads = (int)most;
    if (threads > units) threads = (int)units;
    if (threads > RDK_MAX_THREADS) threads = RDK_MAX_THREADS;
    if (threads < 1) threads = 1;
    for (int t = 0; t < threads; t++) {
        blocks[t] = *proto;
        /* Block bounds on multiples of `group`, so that a row falls in the same group and lane whatever
           the thread count. */
        npy_intp begin = group * (units * t / threads), end = group * (units * (t + 1) / threads);
        blocks[t].begin = begin < rows ? begin : rows;
        blocks[t].end = end < rows ? end : rows;
    }
    if (threads > 1) {
        pthread_attr_t attr;
        int attr_ok = pthread_attr_init(&attr) == 0;
        if (attr_ok) pthread_attr_setstacksize(&attr, RDK_THREAD_STACK_BYTES);
        for (int t = 1; t < threads; t++)
            started[t] = pthread_create(&tid[t], attr_ok ? &attr : NULL, rdk_run_block, &blocks[t]) == 0;
        if (attr_ok) pthread_attr_destroy(&attr);
    }
    rdk_run_block(&blocks[0]);
    for (int t = 1; t < threads; t++) {
        if (started[t]) pthread_join(tid[t], NULL);
        else rdk_run_block(&blocks[t]);
    }
}
