#include <math.h>
typedef double rdk_v4 __attribute__((vector_size(32)));
#define RDK_SPLAT(c) ((rdk_v4){c, c, c, c})
#define RDK_LANES1(f) static inline rdk_v4 rdk_##f##4(rdk_v4 x) \
    { return (rdk_v4){f(x[0]), f(x[1]), f(x[2]), f(x[3])}; }
#define RDK_LANES2(f) static inline rdk_v4 rdk_##f##4(rdk_v4 x, rdk_v4 y) \
    { return (rdk_v4){f(x[0], y[0]), f(x[1], y[1]), f(x[2], y[2]), f(x[3], y[3])}; }
#if defined(RDK_LIBMVEC) && defined(__AVX2__)
rdk_v4 _ZGVdN4v_sin(rdk_v4 x);
rdk_v4 _ZGVdN4v_cos(rdk_v4 x);
#define rdk_sin4 _ZGVdN4v_sin
#define rdk_cos4 _ZGVdN4v_cos
#else
RDK_LANES1(sin) RDK_LANES1(cos)
#endif
RDK_LANES1(sqrt) RDK_LANES1(tan) RDK_LANES1(exp) RDK_LANES1(log)
RDK_LANES1(fabs) RDK_LANES1(atan) RDK_LANES1(asin) RDK_LANES1(acos) RDK_LANES1(tanh)
RDK_LANES2(pow) RDK_LANES2(atan2) RDK_LANES2(fmin) RDK_LANES2(fmax)
