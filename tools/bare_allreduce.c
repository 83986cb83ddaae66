/*
 * bare_allreduce: a minimal, independent MPI_Allreduce timing loop, the baseline that
 * `gradcomp micro-comm --collectives allreduce` is compared against
 * (scripts/compare_bare.sh, docs/performance.md).
 *
 * For every size from MIN_BYTES to MAX_BYTES (doubling; f32 elements, bytes / 4 of
 * them), with the send and receive buffers allocated and touched beforehand, run
 * WARMUP + ITERS iterations of
 *
 *     MPI_Barrier; t0 = MPI_Wtime(); MPI_Allreduce(send, recv, n, MPI_FLOAT, MPI_SUM);
 *     t1 = MPI_Wtime();
 *
 * keep the ITERS timed durations, take the per-iteration maximum over ranks
 * (MPI_Allreduce MAX of the time array after the loop) and print the median over
 * iterations (mean of the two middle values for an even count). Rank 0 prints CSV on
 * stdout: a `bytes,median_s` header, then one row per size.
 *
 * By default this is the classic (OSU-style) loop: MPI_Init, and one pair of
 * MAX_BYTES buffers allocated once and reused by every size, which is also what
 * gradcomp's micro-comm does (one page-aligned buffer set per sweep, MPI_THREAD_SINGLE
 * unless the run has threads). Two options measure the effects of the environment
 * (docs/performance.md, "MPI library effects"):
 *   --thread=LEVEL       MPI_Init_thread at LEVEL (single, funneled, serialized,
 *                        multiple); gradcomp requests funneled when the run has
 *                        threads (e2e, --case-timeout)
 *   --per-size-buffers   allocate (malloc), fill and free exactly-sized buffers for
 *                        every size
 *
 * Build: mpicc -O2 -o target/bare_allreduce tools/bare_allreduce.c
 * Run:   mpirun -np 2 target/bare_allreduce 4 67108864 200 20
 */
#include <mpi.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s MIN_BYTES MAX_BYTES ITERS WARMUP [--thread=LEVEL] [--per-size-buffers]\n"
            "  MIN_BYTES, MAX_BYTES  message sizes in bytes (multiples of 4, 4 <= MIN <= MAX);\n"
            "                        sizes double from MIN_BYTES up to MAX_BYTES\n"
            "  ITERS                 timed iterations per size (>= 1)\n"
            "  WARMUP                untimed warm-up iterations per size (>= 0)\n"
            "  --thread=LEVEL        initialise with MPI_Init_thread at LEVEL (single, funneled,\n"
            "                        serialized, multiple) instead of MPI_Init\n"
            "  --per-size-buffers    allocate exactly-sized buffers for every size instead of\n"
            "                        one pair of MAX_BYTES buffers reused by all sizes\n"
            "prints `bytes,median_s` CSV on rank 0 (median over iterations of the max over ranks)\n"
            "example: mpirun -np 2 %s 4 67108864 200 20\n",
            prog, prog);
}

/* Parse a non-negative decimal integer; 0 on success, -1 on anything else. */
static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (s == NULL || *s == '\0' || *s == '-' || *s == '+')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = (uint64_t)v;
    return 0;
}

/* MPI_THREAD_* level named by s, or -1. */
static int thread_level(const char *s)
{
    if (strcmp(s, "single") == 0)
        return MPI_THREAD_SINGLE;
    if (strcmp(s, "funneled") == 0)
        return MPI_THREAD_FUNNELED;
    if (strcmp(s, "serialized") == 0)
        return MPI_THREAD_SERIALIZED;
    if (strcmp(s, "multiple") == 0)
        return MPI_THREAD_MULTIPLE;
    return -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of xs[0..n) (sorts in place), n >= 1. */
static double median(double *xs, size_t n)
{
    qsort(xs, n, sizeof *xs, cmp_double);
    return n % 2 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

/* Allocate send and receive buffers of n floats each and touch every page: the send
 * buffer holds small exact integers (sums stay exact), the receive buffer zeros. */
static int alloc_buffers(size_t n, int rank, float **send, float **recv)
{
    *send = malloc(n * sizeof **send);
    *recv = malloc(n * sizeof **recv);
    if (*send == NULL || *recv == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        (*send)[i] = (float)((i * 7 + (size_t)rank * 13) % 1021) - 510.0f;
        (*recv)[i] = 0.0f;
    }
    return 0;
}

int main(int argc, char **argv)
{
    /* Options may follow the four positional arguments; the thread level must be known
     * before MPI starts, everything else is checked (and reported by rank 0) after. */
    int level = -1, per_size = 0;
    const char *err = NULL;
    for (int a = 5; a < argc; a++) {
        if (strncmp(argv[a], "--thread=", 9) == 0) {
            level = thread_level(argv[a] + 9);
            if (level < 0)
                err = "--thread= takes single, funneled, serialized or multiple";
        } else if (strcmp(argv[a], "--per-size-buffers") == 0) {
            per_size = 1;
        } else {
            err = "unknown option";
        }
    }
    if (level >= 0) {
        int provided;
        MPI_Init_thread(&argc, &argv, level, &provided);
    } else {
        MPI_Init(&argc, &argv);
    }
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);

    uint64_t min_bytes = 0, max_bytes = 0, iters = 0, warmup = 0;
    if (err != NULL)
        ;
    else if (argc < 5)
        err = "expected MIN_BYTES MAX_BYTES ITERS WARMUP";
    else if (parse_u64(argv[1], &min_bytes) || parse_u64(argv[2], &max_bytes) ||
             parse_u64(argv[3], &iters) || parse_u64(argv[4], &warmup))
        err = "MIN_BYTES, MAX_BYTES, ITERS and WARMUP must be non-negative decimal integers";
    else if (min_bytes < 4 || min_bytes % 4 || max_bytes % 4)
        err = "MIN_BYTES and MAX_BYTES must be multiples of 4, MIN_BYTES >= 4";
    else if (min_bytes > max_bytes)
        err = "MIN_BYTES must not exceed MAX_BYTES";
    else if (max_bytes / 4 > (uint64_t)INT32_MAX)
        err = "MAX_BYTES / 4 must fit in an MPI count (int)";
    else if (iters < 1 || iters > 100000000 || warmup > 100000000)
        err = "ITERS must be in [1, 1e8] and WARMUP in [0, 1e8]";
    if (err != NULL) {
        if (rank == 0) {
            fprintf(stderr, "%s: %s\n", argv[0], err);
            usage(argv[0]);
        }
        MPI_Finalize();
        return 2;
    }

    float *send = NULL, *recv = NULL;
    double *times = malloc((size_t)iters * sizeof *times);
    if (times == NULL || (!per_size && alloc_buffers((size_t)(max_bytes / 4), rank, &send, &recv))) {
        fprintf(stderr, "%s: rank %d: out of memory\n", argv[0], rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    if (rank == 0)
        printf("bytes,median_s\n");
    for (uint64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
        int n = (int)(bytes / 4);
        if (per_size && alloc_buffers((size_t)n, rank, &send, &recv)) {
            fprintf(stderr, "%s: rank %d: out of memory\n", argv[0], rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (uint64_t i = 0; i < warmup + iters; i++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Allreduce(send, recv, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            double t1 = MPI_Wtime();
            if (i >= warmup)
                times[i - warmup] = t1 - t0;
        }
        MPI_Allreduce(MPI_IN_PLACE, times, (int)iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("%llu,%.9e\n", (unsigned long long)bytes, median(times, (size_t)iters));
            fflush(stdout);
        }
        if (per_size) {
            free(send);
            free(recv);
            send = recv = NULL;
        }
        if (bytes > max_bytes / 2)
            break; /* the next doubling would pass MAX_BYTES (or overflow) */
    }

    free(times);
    free(recv);
    free(send);
    MPI_Finalize();
    return 0;
}
