/* M = L^T D L in place, keeping the branch-induced sparsity (Featherstone RBDA Table 6.3): H (n, n) row
   major holds M's lower triangle on entry, L's strictly lower entries and D's diagonal on exit. */
static void rdk_ltdl(double *H, int n)
{
    for (int k = n - 1; k >= 0; k--) {
        for (int i = rdk_lambda[k]; i >= 0; i = rdk_lambda[i]) {
            double alpha = H[k * n + i] / H[k * n + k];
            for (int j = i; j >= 0; j = rdk_lambda[j]) H[i * n + j] -= alpha * H[k * n + j];
            H[k * n + i] = alpha;
        }
    }
}

/* X <- M^-1 X for X (n, m) row major, from the factors of rdk_ltdl (RBDA Table 6.4 applied to all
   columns at once, so that the inner loops run over contiguous rows). */
static void rdk_ltdl_solve(const double *H, int n, double *X, int m)
{
    for (int k = n - 1; k >= 0; k--)
        for (int i = rdk_lambda[k]; i >= 0; i = rdk_lambda[i]) {
            double l = H[k * n + i];
            for (int c = 0; c < m; c++) X[i * m + c] -= l * X[k * m + c];
        }
    for (int k = 0; k < n; k++) {
        double d = H[k * n + k];
        for (int c = 0; c < m; c++) X[k * m + c] /= d;
    }
    for (int k = 0; k < n; k++)
        for (int i = rdk_lambda[k]; i >= 0; i = rdk_lambda[i]) {
            double l = H[k * n + i];
            for (int c = 0; c < m; c++) X[k * m + c] -= l * X[i * m + c];
        }
}
