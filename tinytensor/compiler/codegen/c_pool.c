/* The C backend's thread pool and its gemm job (threads.py, c_pool.py explain both). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

typedef void (*tt_kernel)(void *const *b, const int64_t *n, int64_t part, int64_t parts);

#define TT_MAX_WORKERS 63
static pthread_mutex_t tt_busy = PTHREAD_MUTEX_INITIALIZER;  /* one run at a time */
static pthread_mutex_t tt_mu = PTHREAD_MUTEX_INITIALIZER;    /* guards sleeping */
static pthread_cond_t tt_cv = PTHREAD_COND_INITIALIZER;
static atomic_long tt_epoch;       /* one more per job */
/* The parts of a job are claimed, not assigned: (job << TT_PART_BITS) | next part. A worker
   woken late (an idle vCPU here took 1-1.5 ms to wake after ~10 ms asleep) then finds its
   parts already run by the others instead of holding the job up; which thread runs a part
   never changes what the part computes. The job number in the ticket keeps a late worker of
   a finished job from claiming a part of the next one against the old job's parts count. */
#define TT_PART_BITS 24
static atomic_long tt_ticket;
static atomic_long tt_done;        /* parts of the job finished */
static atomic_int tt_sleepers;
static void *tt_fn;
static void *const *tt_b;
static const int64_t *tt_n;
static int64_t tt_parts;
static int tt_workers;
static int64_t tt_spin_ns;
static int64_t tt_yield_ns;   /* then spins yielding the core, up to this long, before sleeping */
static int tt_hooked;
static long tt_first_epoch[TT_MAX_WORKERS + 1];   /* the epoch when worker k was made */

static inline void tt_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void tt_part(void *fn, void *const *b, const int64_t *n, int64_t part, int64_t parts) {
    ((tt_kernel)fn)(b, n, part, parts);
}

static int64_t tt_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The next unclaimed part of job `job`, or -1 when none is left (or the job is over). */
static int64_t tt_claim(long job) {
    long v = atomic_load_explicit(&tt_ticket, memory_order_acquire);
    for (;;) {
        if ((v >> TT_PART_BITS) != job || (v & ((1L << TT_PART_BITS) - 1)) >= tt_parts) return -1;
        if (atomic_compare_exchange_weak_explicit(&tt_ticket, &v, v + 1, memory_order_acq_rel,
                                                  memory_order_acquire))
            return v & ((1L << TT_PART_BITS) - 1);
    }
}

/* Runs parts of job `job` until none is left. */
static void tt_claim_parts(long job) {
    int64_t p;
    while ((p = tt_claim(job)) >= 0) {
        tt_part(tt_fn, tt_b, tt_n, p, tt_parts);
        atomic_fetch_add_explicit(&tt_done, 1, memory_order_release);
    }
}

static void *tt_worker(void *arg) {
    const int64_t me = (int64_t)(intptr_t)arg;   /* 1 .. tt_workers */
    long seen = tt_first_epoch[me];   /* not the epoch now: a job may have begun since */
    for (;;) {
        long e, spins = 0;
        const int64_t start = tt_now_ns(), until = start + tt_spin_ns, yield_until = start + tt_yield_ns;
        while ((e = atomic_load_explicit(&tt_epoch, memory_order_acquire)) == seen) {
            tt_relax();
            if (++spins & 63) continue;
            const int64_t now = tt_now_ns();
            if (now < until) continue;
            /* a worker asleep on this VM was measured to join a job 1-1.5 ms late (or
               not at all) after its core idled: yielding keeps it awake on its core
               while giving that core to any other runnable thread (OpenBLAS's) */
            if (now < yield_until) { sched_yield(); continue; }
            pthread_mutex_lock(&tt_mu);
            atomic_fetch_add(&tt_sleepers, 1);
            while ((e = atomic_load(&tt_epoch)) == seen) pthread_cond_wait(&tt_cv, &tt_mu);
            atomic_fetch_sub(&tt_sleepers, 1);
            pthread_mutex_unlock(&tt_mu);
            break;
        }
        seen = e;
        tt_claim_parts(e);
    }
    return 0;
}

static void tt_forked_child(void) {   /* the workers did not come along */
    tt_workers = 0;
    pthread_mutex_init(&tt_busy, 0);
    pthread_mutex_init(&tt_mu, 0);
    pthread_cond_init(&tt_cv, 0);
    atomic_store(&tt_sleepers, 0);
}

/* Starts workers up to `workers` in all; returns how many there are. */
int tt_pool_start(int workers, int64_t spin_ns, int64_t yield_ns) {
    pthread_mutex_lock(&tt_busy);
    if (!tt_hooked) { pthread_atfork(0, 0, tt_forked_child); tt_hooked = 1; }
    tt_spin_ns = spin_ns;
    tt_yield_ns = yield_ns;
    if (workers > TT_MAX_WORKERS) workers = TT_MAX_WORKERS;
    while (tt_workers < workers) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        /* a worker's stack holds the kernels' row buffers: 8 MiB like the main thread's */
        pthread_attr_setstacksize(&attr, (size_t)8 << 20);
        tt_first_epoch[tt_workers + 1] = atomic_load(&tt_epoch);   /* no job runs: we hold tt_busy */
        int ok = pthread_create(&t, &attr, tt_worker, (void *)(intptr_t)(tt_workers + 1)) == 0;
        pthread_attr_destroy(&attr);
        if (!ok) break;
        tt_workers++;
    }
    pthread_mutex_unlock(&tt_busy);
    return tt_workers;
}

/* Parts 0..parts-1 of fn; returns 1 if the workers took theirs, 0 if all ran here. */
int tt_pool_run(void *fn, void *const *b, const int64_t *n, int64_t parts) {
    if (parts <= 1 || pthread_mutex_trylock(&tt_busy) != 0) {
        for (int64_t p = 0; p < parts; p++) tt_part(fn, b, n, p, parts);
        return 0;
    }
    if (tt_workers == 0) {   /* read under tt_busy: tt_pool_start writes it there */
        pthread_mutex_unlock(&tt_busy);
        for (int64_t p = 0; p < parts; p++) tt_part(fn, b, n, p, parts);
        return 0;
    }
    if (parts >= (1L << TT_PART_BITS)) parts = (1L << TT_PART_BITS) - 1;   /* never near */
    tt_fn = fn; tt_b = b; tt_n = n; tt_parts = parts;
    const long job = atomic_load(&tt_epoch) + 1;   /* only a caller holding tt_busy writes it */
    atomic_store_explicit(&tt_done, 0, memory_order_relaxed);
    atomic_store_explicit(&tt_ticket, job << TT_PART_BITS, memory_order_release);
    atomic_store_explicit(&tt_epoch, job, memory_order_release);
    if (atomic_load(&tt_sleepers)) {
        pthread_mutex_lock(&tt_mu);
        pthread_cond_broadcast(&tt_cv);
        pthread_mutex_unlock(&tt_mu);
    }
    tt_claim_parts(job);
    while (atomic_load_explicit(&tt_done, memory_order_acquire) < parts) tt_relax();
    pthread_mutex_unlock(&tt_busy);
    return 1;
}
