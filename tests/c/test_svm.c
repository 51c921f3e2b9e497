/*
 * test_svm.c - SVC and SVR against scikit-learn 1.9.1's answers (binary and
 * three-class rbf, linear, poly, sigmoid, class_weight, sample_weight with
 * zeros, epsilon-SVR, iris cross-validation), the CPU kernel op against a
 * naive loop, float32, shrinking and cache-size independence, max_iter,
 * progress and cancellation, blob round trip and corrupt blobs, errors,
 * probability=True (scikit-learn's probA_/probB_ and predict_proba, its
 * random folds), kernel='precomputed', and the warnings.
 */
#include "backend/backend.h"
#include "core/blob.h"
#include "core/tensor.h"
#include "estimators/svm/libsvm_rand.h"
#include "test_api_helpers.h"

/* ---- scikit-learn reference answers -------------------------------------------
 * Produced by this script (numpy 2.x, scikit-learn 1.9.1; warnings ignored):
 *   rng = np.random.RandomState(7)
 *   X1 = np.round(rng.randn(40, 3), 3)
 *   y1 = (X1[:, 0] + 0.5 * X1[:, 1] ** 2 - 0.3 + 0.6 * rng.randn(40) > 0) * 2.0 + 1
 *   T1 = np.round(rng.randn(5, 3), 3)
 *   C2 = np.array([[0, 0], [2, 0.5], [1, 2]])
 *   X2 = np.round(np.repeat(C2, 15, axis=0) + 0.8 * rng.randn(45, 2), 3)
 *   y2 = np.repeat([0., 1., 2.], 15)
 *   perm = rng.permutation(45); X2 = X2[perm]; y2 = y2[perm]
 *   T2 = np.round(rng.randn(6, 2) + 1, 3)
 *   YS = np.round(np.sin(X1[:, 0]) + 0.3 * X1[:, 1] + 0.1 * rng.randn(40), 3)
 * and for each model m (tag: estimator): m.support_, m.dual_coef_,
 * m.intercept_, m.n_support_, m.decision_function(T), m.predict(T),
 * m.n_iter_ (and m.coef_ for linear kernels):
 *   B:  SVC().fit(X1, y1)                      Bt: SVC(tol=1e-6).fit(X1, y1)
 *   L:  SVC(kernel="linear", C=0.5).fit(X1, y1)
 *   P:  SVC(kernel="poly", degree=3, coef0=1.0, gamma="auto", C=2.0).fit(X1, y1)
 *   S:  SVC(kernel="sigmoid", gamma=0.2, coef0=-0.5).fit(X1, y1)
 *   M:  SVC(C=3.0).fit(X2, y2) (T2); M_dec_ovo with decision_function_shape="ovo",
 *       M_pred_bt with break_ties=True
 *   I3 = np.r_[np.where(y2 != 2)[0], np.where(y2 == 2)[0][:5]]
 *   W:  SVC(class_weight="balanced", kernel="linear").fit(X2[I3], y2[I3]); W_cw = class_weight_
 *   SW = np.round(rng.uniform(0.5, 2, size=45), 2); SW[[3, 10, 20]] = 0
 *   Z:  SVC(class_weight={0: 2.0, 2: 0.5}).fit(X2, y2, sample_weight=SW)
 *   R:  SVR().fit(X1, YS)     Rt: SVR(tol=1e-6, C=3.0, epsilon=0.05).fit(X1, YS)
 *   RL: SVR(kernel="linear", C=0.7).fit(X1, YS): coef_, intercept_, predict(T1)
 *   IRIS_X, IRIS_Y = load_iris(); IRIS_FOLD[i] = the StratifiedKFold(5) fold
 *   testing sample i; IRIS_CV = cross_val_score(SVC(), X, y, cv=StratifiedKFold(5)).mean()
 */
static const double X1[120] = {
    1.691, -0.466, 0.033, 0.408, -0.789, 0.002, -0.001, -1.755, 1.018, 0.600, -0.625,
    -0.172, 0.505, -0.261, -0.243, -1.453, 0.555, 0.124, 0.274, -1.527, 1.651, 0.154,
    -0.387, 2.029, -0.045, -1.451, -0.405, -2.288, 1.049, -0.416, -0.743, 1.072, -1.651,
    0.535, -2.064, -0.662, -1.204, 1.462, 1.766, -0.329, 0.841, -0.180, 0.568, -0.753,
    -1.708, -1.803, 0.383, 2.248, 0.269, -0.525, 1.912, 0.237, 0.101, 0.253, -0.132, -0.309,
    -1.435, 0.502, -0.095, 1.193, -0.369, -1.906, -0.100, 1.700, -0.383, -0.890, -1.194,
    -1.050, -0.300, -1.180, 1.498, -0.283, 0.109, 1.438, 1.503, -0.213, 0.332, 0.735,
    -0.193, -1.778, 0.655, 0.894, 0.416, -0.924, -0.196, -0.591, -0.300, 1.297, 1.530,
    0.669, 0.549, 0.677, -0.012, -0.076, -0.674, -0.056, 2.260, 0.869, -0.342, -0.472,
    -0.864, 0.374, 0.392, -1.443, 0.486, -0.569, 1.427, 0.157, 1.718, -0.458, -0.288, 0.300,
    1.056, 0.566, -1.234, 0.183, 0.022, -0.429, -0.648, 1.748};
static const double Y1[40] = {
    3, 1, 3, 3, 3, 1, 3, 3, 3, 1, 1, 3, 1, 1, 1, 1, 3, 1, 1, 3, 3, 3, 1, 1, 3, 1, 3, 3, 1,
    3, 3, 1, 3, 3, 3, 3, 3, 3, 1, 3};
static const double T1[15] = {
    -0.929, 0.412, 1.860, -1.497, 0.476, 1.112, -0.697, 0.583, -1.071, -0.812, -0.817,
    0.192, -0.091, 0.954, -0.940};
static const double X2[90] = {
    1.818, -0.332, 2.474, 0.643, -0.520, 3.020, 1.351, 2.048, 0.118, -1.347, 1.302, 3.168,
    -1.483, -1.096, 1.503, 2.996, 1.781, 1.625, 1.651, 0.588, 2.649, 0.145, 0.308, 0.241,
    1.227, 1.894, -0.121, 1.866, 1.760, 0.880, 2.031, 0.344, 0.509, 0.751, 1.015, 2.589,
    1.651, -1.529, 0.975, 0.093, 0.910, 0.219, 1.937, 2.916, -0.105, 0.769, 0.449, -1.060,
    0.529, 1.914, 2.631, 0.740, 2.018, 1.046, 2.575, 0.398, 2.078, 0.817, 0.062, 3.031,
    0.816, 1.852, 3.392, 0.324, 1.541, 0.026, 1.747, 0.975, 1.408, 0.460, 1.585, 1.278,
    0.812, -1.153, -0.599, 0.866, 0.722, 1.580, 0.203, 1.985, -1.075, -0.289, 0.532, -0.383,
    1.862, -0.410, 0.585, -0.207, -0.646, -1.642};
static const double Y2[45] = {
    1, 1, 2, 2, 0, 2, 0, 2, 2, 2, 1, 0, 2, 2, 1, 1, 0, 2, 0, 0, 0, 2, 0, 0, 2, 1, 1, 1, 1,
    2, 2, 1, 1, 1, 1, 1, 0, 0, 2, 2, 0, 0, 1, 0, 0};
static const double T2[12] = {
    1.063, 1.497, 1.088, 2.514, 0.903, 1.874, 1.713, 1.486, -1.014, 2.156, 0.285, 1.005};
static const double YS[40] = {
    0.844, 0.182, -0.602, 0.361, 0.335, -0.880, -0.187, 0.095, -0.473, -0.364, -0.324,
    -0.047, -0.416, -0.172, 0.148, -0.823, 0.041, 0.352, -0.256, 0.223, -1.103, 0.948,
    -1.324, -0.534, 0.415, -0.185, -0.650, 0.854, -0.393, 1.421, 0.855, -0.418, 1.099,
    -0.725, -0.047, -0.118, 0.688, 0.617, -0.825, -0.564};
static const int B_support[29] = {
    1, 9, 10, 12, 13, 14, 15, 17, 18, 22, 23, 25, 28, 31, 3, 4, 7, 8, 11, 19, 20, 21, 24,
    27, 30, 33, 35, 37, 39};
static const double B_dual[29] = {
    -1, -0.122211176205, -0.42449956311, -1, -1, -1, -0.942231391043, -1, -0.483843675161,
    -1, -0.854327626377, -1, -1, -1, 1, 1, 0.3252991353, 1, 0.321384488569, 0.089037463668,
    1, 0.301304736082, 1, 1, 1, 1, 1, 0.790087608278, 1};
static const double B_icpt[1] = {
    0.105754402857};
static const int B_nsup[2] = {
    14, 15};
static const double B_dec[5] = {
    -0.414051869206, -1.14763016351, -1.36852568096, -0.43070674246, -0.400456512491};
static const double B_pred[5] = {
    1, 1, 1, 1, 1};
static const int B_niter[1] = {
    36};
static const double B_gamma = 0.33496348732;
static const int Bt_support[29] = {
    1, 9, 10, 12, 13, 14, 15, 17, 18, 22, 23, 25, 28, 31, 3, 4, 7, 8, 11, 19, 20, 21, 24,
    27, 30, 33, 35, 37, 39};
static const double Bt_dual[29] = {
    -1, -0.121994977117, -0.423755048065, -1, -1, -1, -0.942017298876, -1, -0.484521171567,
    -1, -0.854520795167, -1, -1, -1, 1, 1, 0.323782929578, 1, 0.321417605869,
    0.0905521161247, 1, 0.301679722585, 1, 1, 1, 1, 1, 0.789376916636, 1};
static const double Bt_icpt[1] = {
    0.105752624007};
static const int Bt_nsup[2] = {
    14, 15};
static const double Bt_dec[5] = {
    -0.414333289106, -1.14768006534, -1.36843340683, -0.43076033786, -0.400424331633};
static const double Bt_pred[5] = {
    1, 1, 1, 1, 1};
static const int Bt_niter[1] = {
    63};
static const int L_support[21] = {
    1, 12, 13, 14, 15, 17, 18, 25, 28, 31, 4, 8, 20, 24, 26, 27, 30, 33, 35, 37, 39};
static const double L_dual[21] = {
    -0.5, -0.5, -0.5, -0.5, -0.413975070887, -0.5, -0.5, -0.5, -0.5, -0.5, 0.5, 0.5, 0.5,
    0.396565079718, 0.102222175854, 0.5, 0.5, 0.5, 0.5, 0.5, 0.415187815315};
static const double L_icpt[1] = {
    0.334490738433};
static const int L_nsup[2] = {
    10, 11};
static const double L_dec[5] = {
    0.0212777791754, -1.29384728533, -1.52757905446, -0.481394001399, -0.674822456993};
static const double L_pred[5] = {
    3, 1, 1, 1, 1};
static const int L_niter[1] = {
    114};
static const double L_coef[3] = {
    1.45677819379, -0.302084600507, 0.626125181817};
static const int P_support[18] = {
    1, 12, 13, 14, 17, 22, 23, 25, 28, 31, 3, 4, 8, 19, 30, 33, 35, 39};
static const double P_dual[18] = {
    -2, -0.0873988282824, -2, -0.334904814858, -2, -0.124130169748, -0.360520990124,
    -1.97817407783, -0.709524915359, -2, 2, 2, 0.734847544258, 0.949274769415,
    1.79033275786, 2, 2, 0.120198724662};
static const double P_icpt[1] = {
    -0.90241487876};
static const int P_nsup[2] = {
    10, 8};
static const double P_dec[5] = {
    -1.59256935745, -2.77298217902, -2.76036820177, -0.811751939807, -0.601253492862};
static const double P_pred[5] = {
    1, 1, 1, 1, 1};
static const int P_niter[1] = {
    76};
static const int S_support[26] = {
    1, 10, 12, 13, 14, 15, 17, 18, 22, 25, 28, 31, 38, 3, 4, 7, 8, 11, 20, 24, 27, 30, 33,
    35, 37, 39};
static const double S_dual[26] = {
    -1, -0.222806482109, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -0.567243687696, 1, 1,
    0.336143167214, 1, 0.453907002592, 1, 1, 1, 1, 1, 1, 1, 1};
static const double S_icpt[1] = {
    0.32411761731};
static const int S_nsup[2] = {
    13, 13};
static const double S_dec[5] = {
    -0.185992185092, -0.991412675482, -0.787085702335, -0.167587536104, -0.129651808394};
static const double S_pred[5] = {
    1, 1, 1, 1, 1};
static const int S_niter[1] = {
    29};
static const int M_support[21] = {
    6, 16, 18, 19, 20, 37, 44, 26, 31, 32, 33, 34, 35, 42, 2, 8, 9, 12, 13, 21, 38};
static const double M_dual[42] = {
    0.243340360904, 0, 1.6314510914, 3, 3, 0, 0, -0, -0.158307615861, -3, -0, -3,
    -0.256797138027, -1.45968669841, -0, -0, -3, -0, -2.07568988191, -0.314780646804,
    -1.17336632218, 0.504902491455, 3, 0.897343131626, 0, 1.3080496724, 0.746331859797,
    0.10720969561, 0.819205812063, 0.531333438397, 0, 3, 1.15803320053, 3, 0.289594014806,
    -0.328628546283, -3, -3, -1.01161049804, -0, -0, -1.45792742147};
static const double M_icpt[3] = {
    0.458364051946, 0.0471131517975, -0.132291846721};
static const int M_nsup[3] = {
    7, 7, 7};
static const double M_dec[18] = {
    -0.188186075304, 0.895409146449, 2.21228676424, 0.802817229522, -0.208157484946,
    2.2522538173, 0.808103282736, -0.19062038414, 2.24305925924, -0.239133497789,
    2.17216745245, 1.19839773063, 0.948936258046, -0.197270012785, 2.2066264613,
    2.21030489083, -0.211795654014, 1.01072139684};
static const double M_pred[6] = {
    2, 2, 2, 1, 2, 0};
static const int M_niter[3] = {
    17, 31, 54};
static const double M_dec_ovo[18] = {
    -0.137760699501, -1.15875759412, -0.595003506568, 0.142811342729, -1.59108130462,
    -1.52010916172, 0.106425638795, -1.46319393966, -1.22926523732, -0.966131771705,
    -1.57244482354, 0.102130639099, 0.616528765524, -0.797432920677, -0.833311000184,
    1.17087860896, 0.538521969847, -0.571755076343};
static const double M_pred_bt[6] = {
    2, 2, 2, 1, 2, 0};
static const int I3[35] = {
    0, 1, 4, 6, 10, 11, 14, 15, 16, 18, 19, 20, 22, 23, 25, 26, 27, 28, 31, 32, 33, 34, 35,
    36, 37, 40, 41, 42, 43, 44, 2, 3, 5, 7, 8};
static const int W_support[15] = {
    8, 9, 10, 11, 0, 6, 15, 19, 20, 21, 22, 27, 30, 31, 34};
static const double W_dual[30] = {
    0.611160126138, 0.777777777778, 0.777777777778, 0.777777777778, -0.777777777778, -0, -0,
    -0.777777777778, -0, -0.777777777778, -0, -0.611160126138, -0.18382513033, -0,
    -0.663553355631, 0.777777777778, 0, 0, 0.0696007081832, 0, 0.369613549481,
    0.777777777778, 0, 0.777777777778, 0, 0.777777777778, 0, -0, -0.369613549481,
    -2.33333333333};
static const double W_icpt[3] = {
    2.17617022869, 1.79696288057, 2.18294323188};
static const int W_nsup[3] = {
    4, 8, 3};
static const double W_dec[18] = {
    -0.133994979462, 1.03647000425, 2.11818900466, -0.227411506373, 0.821601160879,
    2.2557854916, -0.14924631125, 0.865307544505, 2.19940040909, -0.229950311953,
    1.19437399683, 2.15073223561, 2.25791069317, -0.275520090021, 1.19125673023,
    2.21791737518, 0.857440815162, -0.177631034594};
static const double W_pred[6] = {
    2, 2, 2, 2, 0, 0};
static const int W_niter[3] = {
    8, 8, 7};
static const double W_coef[6] = {
    -1.78434409511, -0.356776426887, -0.626973925272, -1.03407243029, 0.156616386182,
    -1.65748640357};
static const double W_cw[3] = {
    0.777777777778, 0.777777777778, 2.33333333333};
static const double SW[45] = {
    1.12, 1.85, 0.60, 0.00, 1.51, 0.90, 1.87, 0.75, 0.97, 0.70, 0.00, 1.80, 0.78, 1.62,
    0.99, 0.95, 1.43, 1.42, 1.09, 0.72, 0.00, 0.97, 1.36, 1.55, 1.91, 1.60, 1.67, 0.87,
    1.54, 0.59, 1.29, 1.90, 0.68, 1.69, 0.74, 0.59, 1.72, 1.78, 1.45, 0.78, 1.68, 1.80,
    1.70, 1.48, 1.95};
static const int Z_support[25] = {
    5, 14, 16, 17, 34, 40, 41, 0, 23, 28, 29, 30, 31, 32, 39, 2, 7, 8, 10, 11, 18, 21, 27,
    35, 36};
static const double Z_dual[50] = {
    0.308248725392, 1.2255036456, 2.00315207615, 1.44, 0, 0.293342223376, 0,
    -0.966860203039, -0, -0.423526687787, -0.68, -0.169859779692, -0.74, -0.59, -1.7, -0.3,
    -0.485, -0.35, -0, -0.81, -0.485, -0.484370125752, -0, -0.725, -0.39, 0.356880621056,
    2.27967033493, 0.585312786026, 0, 0.606746062134, 0, 0.200760321608, 0, 0.0280755755664,
    0.556343548352, 0, 1.69, 0.465406954142, 0.59, 0.0501739219386, -0.3, -0.485, -0.35,
    -0.39, -0, -0.485, -0, -0.645, -0.725, -0};
static const double Z_icpt[3] = {
    0.481514073545, 0.253777450472, -0.0516321092932};
static const int Z_nsup[3] = {
    7, 8, 10};
static const double Z_dec[18] = {
    0.909004969512, -0.119701538942, 2.16113965167, 0.825707765779, -0.202457495892,
    2.24182957374, 0.868539742537, -0.189792476708, 2.22122904283, -0.186049293157,
    2.14922187345, 1.10387604123, 1.07666122285, -0.194063770382, 2.17420658362,
    2.21759826145, -0.203825099224, 0.921839892981};
static const double Z_pred[6] = {
    2, 2, 2, 1, 2, 0};
static const int Z_niter[3] = {
    16, 20, 21};
static const int R_support[24] = {
    0, 1, 2, 5, 7, 9, 10, 11, 13, 15, 18, 19, 20, 21, 22, 23, 27, 29, 30, 32, 33, 34, 36, 39};
static const double R_dual[24] = {
    0.307818965769, 0.142824176757, -0.476543087937, -0.165141179699, 0.799618279195,
    0.0355986690303, -0.013886673058, 0.233764854022, -0.0940687087992, -0.518849345427,
    -0.0435849429525, -0.338080130024, -1, 1, -0.708046068906, -0.274774378775,
    0.0232107929321, 1, 0.300998614467, 0.361959347959, 0.0597429675401, 1, -1,
    -0.632562152092};
static const double R_icpt[1] = {
    -0.0550808863897};
static const double R_pred[5] = {
    -0.5701079481, -0.809202231369, -0.358812627177, -1.06989072276, 0.0763408475067};
static const int R_niter = 105;
static const int Rt_support[34] = {
    0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 13, 14, 15, 17, 19, 20, 21, 22, 23, 24, 26, 27, 28, 29,
    30, 31, 32, 33, 34, 35, 36, 37, 38, 39};
static const double Rt_dual[34] = {
    1.90223235679, 1.48305006628, -3, -2.62499945164, -2.37588884442, 0.418852397386,
    2.32885355037, 2.06969765718, 0.408234441482, -0.0192176209575, -1.55712431649,
    -0.165904946223, -0.47262149597, 3, -2.11599273533, -3, 1.92182379021, -1.36996587936,
    -0.154932270416, 0.0305199397993, 3, 0.493255467825, 0.755937723449, 1.33373336422,
    0.901068793661, -3, 0.0448733681606, 0.850820162227, 1.09177105992, 0.72958121207, -3,
    -0.685776487085, 2.44277214841, -1.66465345154};
static const double Rt_icpt[1] = {
    -0.0301513986817};
static const double Rt_pred[5] = {
    -0.626936629716, -0.917363701557, -0.451914706257, -1.02968356369, 0.0189249375122};
static const int Rt_niter = 1134;
static const double RL_coef[3] = {
    0.666522783868, 0.301634229885, 0.034942171799};
static const double RL_icpt[1] = {
    -0.0437637661074};
static const double RL_pred[5] = {
    -0.473697690062, -0.859114785092, -0.369900456437, -0.824706535439, 0.15049607438};
static const double IRIS_X[600] = {
    5.1, 3.5, 1.4, 0.2, 4.9, 3.0, 1.4, 0.2, 4.7, 3.2, 1.3, 0.2, 4.6, 3.1, 1.5, 0.2, 5.0,
    3.6, 1.4, 0.2, 5.4, 3.9, 1.7, 0.4, 4.6, 3.4, 1.4, 0.3, 5.0, 3.4, 1.5, 0.2, 4.4, 2.9,
    1.4, 0.2, 4.9, 3.1, 1.5, 0.1, 5.4, 3.7, 1.5, 0.2, 4.8, 3.4, 1.6, 0.2, 4.8, 3.0, 1.4,
    0.1, 4.3, 3.0, 1.1, 0.1, 5.8, 4.0, 1.2, 0.2, 5.7, 4.4, 1.5, 0.4, 5.4, 3.9, 1.3, 0.4,
    5.1, 3.5, 1.4, 0.3, 5.7, 3.8, 1.7, 0.3, 5.1, 3.8, 1.5, 0.3, 5.4, 3.4, 1.7, 0.2, 5.1,
    3.7, 1.5, 0.4, 4.6, 3.6, 1.0, 0.2, 5.1, 3.3, 1.7, 0.5, 4.8, 3.4, 1.9, 0.2, 5.0, 3.0,
    1.6, 0.2, 5.0, 3.4, 1.6, 0.4, 5.2, 3.5, 1.5, 0.2, 5.2, 3.4, 1.4, 0.2, 4.7, 3.2, 1.6,
    0.2, 4.8, 3.1, 1.6, 0.2, 5.4, 3.4, 1.5, 0.4, 5.2, 4.1, 1.5, 0.1, 5.5, 4.2, 1.4, 0.2,
    4.9, 3.1, 1.5, 0.2, 5.0, 3.2, 1.2, 0.2, 5.5, 3.5, 1.3, 0.2, 4.9, 3.6, 1.4, 0.1, 4.4,
    3.0, 1.3, 0.2, 5.1, 3.4, 1.5, 0.2, 5.0, 3.5, 1.3, 0.3, 4.5, 2.3, 1.3, 0.3, 4.4, 3.2,
    1.3, 0.2, 5.0, 3.5, 1.6, 0.6, 5.1, 3.8, 1.9, 0.4, 4.8, 3.0, 1.4, 0.3, 5.1, 3.8, 1.6,
    0.2, 4.6, 3.2, 1.4, 0.2, 5.3, 3.7, 1.5, 0.2, 5.0, 3.3, 1.4, 0.2, 7.0, 3.2, 4.7, 1.4,
    6.4, 3.2, 4.5, 1.5, 6.9, 3.1, 4.9, 1.5, 5.5, 2.3, 4.0, 1.3, 6.5, 2.8, 4.6, 1.5, 5.7,
    2.8, 4.5, 1.3, 6.3, 3.3, 4.7, 1.6, 4.9, 2.4, 3.3, 1.0, 6.6, 2.9, 4.6, 1.3, 5.2, 2.7,
    3.9, 1.4, 5.0, 2.0, 3.5, 1.0, 5.9, 3.0, 4.2, 1.5, 6.0, 2.2, 4.0, 1.0, 6.1, 2.9, 4.7,
    1.4, 5.6, 2.9, 3.6, 1.3, 6.7, 3.1, 4.4, 1.4, 5.6, 3.0, 4.5, 1.5, 5.8, 2.7, 4.1, 1.0,
    6.2, 2.2, 4.5, 1.5, 5.6, 2.5, 3.9, 1.1, 5.9, 3.2, 4.8, 1.8, 6.1, 2.8, 4.0, 1.3, 6.3,
    2.5, 4.9, 1.5, 6.1, 2.8, 4.7, 1.2, 6.4, 2.9, 4.3, 1.3, 6.6, 3.0, 4.4, 1.4, 6.8, 2.8,
    4.8, 1.4, 6.7, 3.0, 5.0, 1.7, 6.0, 2.9, 4.5, 1.5, 5.7, 2.6, 3.5, 1.0, 5.5, 2.4, 3.8,
    1.1, 5.5, 2.4, 3.7, 1.0, 5.8, 2.7, 3.9, 1.2, 6.0, 2.7, 5.1, 1.6, 5.4, 3.0, 4.5, 1.5,
    6.0, 3.4, 4.5, 1.6, 6.7, 3.1, 4.7, 1.5, 6.3, 2.3, 4.4, 1.3, 5.6, 3.0, 4.1, 1.3, 5.5,
    2.5, 4.0, 1.3, 5.5, 2.6, 4.4, 1.2, 6.1, 3.0, 4.6, 1.4, 5.8, 2.6, 4.0, 1.2, 5.0, 2.3,
    3.3, 1.0, 5.6, 2.7, 4.2, 1.3, 5.7, 3.0, 4.2, 1.2, 5.7, 2.9, 4.2, 1.3, 6.2, 2.9, 4.3,
    1.3, 5.1, 2.5, 3.0, 1.1, 5.7, 2.8, 4.1, 1.3, 6.3, 3.3, 6.0, 2.5, 5.8, 2.7, 5.1, 1.9,
    7.1, 3.0, 5.9, 2.1, 6.3, 2.9, 5.6, 1.8, 6.5, 3.0, 5.8, 2.2, 7.6, 3.0, 6.6, 2.1, 4.9,
    2.5, 4.5, 1.7, 7.3, 2.9, 6.3, 1.8, 6.7, 2.5, 5.8, 1.8, 7.2, 3.6, 6.1, 2.5, 6.5, 3.2,
    5.1, 2.0, 6.4, 2.7, 5.3, 1.9, 6.8, 3.0, 5.5, 2.1, 5.7, 2.5, 5.0, 2.0, 5.8, 2.8, 5.1,
    2.4, 6.4, 3.2, 5.3, 2.3, 6.5, 3.0, 5.5, 1.8, 7.7, 3.8, 6.7, 2.2, 7.7, 2.6, 6.9, 2.3,
    6.0, 2.2, 5.0, 1.5, 6.9, 3.2, 5.7, 2.3, 5.6, 2.8, 4.9, 2.0, 7.7, 2.8, 6.7, 2.0, 6.3,
    2.7, 4.9, 1.8, 6.7, 3.3, 5.7, 2.1, 7.2, 3.2, 6.0, 1.8, 6.2, 2.8, 4.8, 1.8, 6.1, 3.0,
    4.9, 1.8, 6.4, 2.8, 5.6, 2.1, 7.2, 3.0, 5.8, 1.6, 7.4, 2.8, 6.1, 1.9, 7.9, 3.8, 6.4,
    2.0, 6.4, 2.8, 5.6, 2.2, 6.3, 2.8, 5.1, 1.5, 6.1, 2.6, 5.6, 1.4, 7.7, 3.0, 6.1, 2.3,
    6.3, 3.4, 5.6, 2.4, 6.4, 3.1, 5.5, 1.8, 6.0, 3.0, 4.8, 1.8, 6.9, 3.1, 5.4, 2.1, 6.7,
    3.1, 5.6, 2.4, 6.9, 3.1, 5.1, 2.3, 5.8, 2.7, 5.1, 1.9, 6.8, 3.2, 5.9, 2.3, 6.7, 3.3,
    5.7, 2.5, 6.7, 3.0, 5.2, 2.3, 6.3, 2.5, 5.0, 1.9, 6.5, 3.0, 5.2, 2.0, 6.2, 3.4, 5.4,
    2.3, 5.9, 3.0, 5.1, 1.8};
static const double IRIS_Y[150] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2};
static const int IRIS_FOLD[150] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3,
    3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4};
static const double IRIS_CV = 0.96666666666666656;

static gsb_session *S;

/* ---- helpers ------------------------------------------------------------------------- */

/* Attribute name of m into out (at most cap values); its element count,
 * -1 when missing.  *dtype and the shape when asked. */
static int64_t attr(gsb_model *m, const char *name, double *out, int64_t cap, gsb_dtype *dtype,
                    int *ndim)
{
    gsb_array info;
    int64_t n = testing_attr(m, name, out, cap, &info);
    if (n >= 0 && dtype)
        *dtype = info.dtype;
    if (n >= 0 && ndim)
        *ndim = info.ndim;
    return n;
}

/* Output of method on X (rows x d) into out, which must be float64; element
 * count or -1. */
static int64_t call(gsb_model *m, const char *method, const gsb_array *X, double *out,
                    int64_t cap, int *ndim)
{
    gsb_array info;
    int64_t n = testing_call(m, method, X, NULL, out, cap, &info);
    if (n < 0)
        return -1;
    if (ndim)
        *ndim = info.ndim;
    CHECK(info.dtype == GSB_F64);
    return n;
}

/* A model of est fitted on X (rows x d, dtype) and y, sample weights sw (may
 * be NULL); NULL (with a failed check) when the fit fails. */
static gsb_model *fit(const char *est, const char *params, const double *X, int64_t rows,
                      int64_t d, gsb_dtype dtype, const double *y, const double *sw)
{
    gsb_model *m = testing_model(S, est, params);
    if (!m)
        return NULL;
    float *xf = malloc((size_t)(rows * d) * sizeof *xf);
    if (xf)
        testing_to_f32(X, xf, rows * d);
    gsb_array xa = dtype == GSB_F32 ? gsb_array_2d(xf, GSB_F32, rows, d)
                                    : gsb_array_2d((void *)X, GSB_F64, rows, d);
    gsb_array ya = gsb_array_1d((void *)y, GSB_F64, rows);
    gsb_array wa = gsb_array_1d((void *)sw, GSB_F64, rows);
    int rc = testing_fit(m, &xa, &ya, sw ? &wa : NULL);
    CHECK_OK(rc);
    free(xf);
    if (rc != GSB_OK) {
        gsb_model_free(m);
        return NULL;
    }
    return m;
}

/* Rows idx of X (d columns) into out. */
static void take_rows(const double *X, int64_t d, const int *idx, int64_t n, double *out)
{
    for (int64_t i = 0; i < n; i++)
        memcpy(out + i * d, X + (int64_t)idx[i] * d, (size_t)d * sizeof *X);
}

/* An internal (underscore) attribute, which only a blob shows: its first
 * value, NAN when missing. */
static double internal_scalar(gsb_model *m, const char *name)
{
    void *blob = NULL;
    size_t len = 0;
    double v = NAN;
    CHECK_OK(gsb_model_export(m, &blob, &len));
    char *est = NULL;
    json_t *params = NULL;
    gsb__nlist attrs = {0};
    int fitted = 0;
    if (blob && gsb__blob_read(blob, len, &est, &params, &attrs, &fitted) == GSB_OK) {
        const gsb__tensor *t = gsb__nlist_get(&attrs, name);
        if (t)
            v = gsb__tensor_get(t, 0);
    }
    gsb_free(blob);
    free(est);
    json_decref(params);
    gsb__nlist_clear(&attrs);
    return v;
}

typedef struct svc_ref {
    const int *support;
    const double *dual, *icpt, *dec, *pred;
    const int *nsup, *niter;
    const double *coef; /* linear kernels, else NULL */
    int64_t nsv, K, n_test;
} svc_ref;

#define SVC_REF(tag, K_, ntest)                                                            \
    ((svc_ref){tag##_support, tag##_dual, tag##_icpt, tag##_dec, tag##_pred, tag##_nsup,  \
               tag##_niter, NULL, sizeof tag##_support / sizeof(int), K_, ntest})

/* The fitted SVC m against ref: supports exactly, values within tol. */
static void check_svc(gsb_model *m, const svc_ref *ref, const double *T, int64_t d, double tol,
                      int exact_iter)
{
    int64_t K = ref->K, P = K * (K - 1) / 2, nsv = ref->nsv;
    double buf[4096];
    gsb_dtype dt;
    int nd;
    CHECK(attr(m, "support_", buf, 4096, &dt, &nd) == nsv);
    CHECK(dt == GSB_I32 && nd == 1);
    for (int64_t i = 0; i < nsv; i++)
        CHECK(buf[i] == ref->support[i]);
    CHECK(attr(m, "n_support_", buf, 4096, &dt, NULL) == K);
    CHECK(dt == GSB_I32);
    for (int64_t k = 0; k < K; k++)
        CHECK(buf[k] == ref->nsup[k]);
    CHECK(attr(m, "dual_coef_", buf, 4096, &dt, &nd) == (K - 1) * nsv);
    CHECK(dt == GSB_F64 && nd == 2);
    CHECK(testing_relerr(buf, ref->dual, (K - 1) * nsv) <= tol);
    CHECK(attr(m, "intercept_", buf, 4096, NULL, &nd) == P);
    CHECK(nd == 1);
    for (int64_t p = 0; p < P; p++)
        CHECK_CLOSE(buf[p], ref->icpt[p], tol);
    CHECK(attr(m, "support_vectors_", buf, 4096, &dt, NULL) == nsv * d);
    CHECK(dt == GSB_F64);
    if (exact_iter) {
        CHECK(attr(m, "n_iter_", buf, 4096, &dt, NULL) == P);
        CHECK(dt == GSB_I32);
        for (int64_t p = 0; p < P; p++)
            CHECK(buf[p] == ref->niter[p]);
    }
    if (ref->coef) {
        CHECK(attr(m, "coef_", buf, 4096, NULL, &nd) == P * d);
        CHECK(testing_relerr(buf, ref->coef, P * d) <= tol);
    } else {
        CHECK(attr(m, "coef_", buf, 4096, NULL, NULL) == -1);
    }
    gsb_array t = gsb_array_2d((void *)T, GSB_F64, ref->n_test, d);
    int64_t cols = K == 2 ? 1 : K;
    CHECK(call(m, "decision_function", &t, buf, 4096, &nd) == ref->n_test * cols);
    CHECK(nd == (K == 2 ? 1 : 2));
    CHECK(testing_relerr(buf, ref->dec, ref->n_test * cols) <= tol);
    CHECK(call(m, "predict", &t, buf, 4096, &nd) == ref->n_test);
    CHECK(nd == 1);
    for (int64_t i = 0; i < ref->n_test; i++)
        CHECK(buf[i] == ref->pred[i]);
}

/* ---- the kernel op ------------------------------------------------------------------- */

static double naive_kernel(int kind, const double *x, const double *y, int64_t d, double gamma,
                           double coef0, int degree)
{
    double dot = 0, sq = 0;
    for (int64_t k = 0; k < d; k++) {
        dot += x[k] * y[k];
        sq += (x[k] - y[k]) * (x[k] - y[k]);
    }
    switch (kind) {
    case 1: return pow(gamma * dot + coef0, degree);
    case 2: return exp(-gamma * sq);
    case 3: return tanh(gamma * dot + coef0);
    default: return dot;
    }
}

static void kernel_case(gsb_dtype dt, int kind, int64_t n, int64_t m, int64_t d)
{
    const gsb__backend *be = gsb__cpu_backend();
    double *x = malloc((size_t)(n * d) * sizeof *x), *y = malloc((size_t)(m * d) * sizeof *y);
    testing_fill_normal(x, n * d);
    testing_fill_normal(y, m * d);
    gsb__tensor X, Y, K;
    CHECK_OK(gsb__tensor_alloc(be, dt, n, d, &X));
    CHECK_OK(gsb__tensor_alloc(be, dt, m, d, &Y));
    CHECK_OK(gsb__tensor_alloc(be, dt, n, m, &K));
    /* the float32 reference uses the rounded inputs */
    for (int64_t i = 0; i < n * d; i++) {
        gsb__tensor_set(&X, i, x[i]);
        x[i] = gsb__tensor_get(&X, i);
    }
    for (int64_t i = 0; i < m * d; i++) {
        gsb__tensor_set(&Y, i, y[i]);
        y[i] = gsb__tensor_get(&Y, i);
    }
    double gamma = 0.3 / (double)d, coef0 = 0.7;
    int degree = 3;
    CHECK_OK(be->ops->kernel(be, &X, &Y, kind, gamma, coef0, degree, &K));
    double worst = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++) {
            double want = naive_kernel(kind, x + i * d, y + j * d, d, gamma, coef0, degree);
            double got = gsb__tensor_get(&K, i * m + j);
            double err = fabs(got - want) / fmax(1.0, fabs(want));
            worst = isnan(got) ? INFINITY : fmax(worst, err);
        }
    double tol = dt == GSB_F32 ? 1e-6 : 1e-12;
    if (!(worst <= tol))
        fprintf(stderr, "kernel kind %d dtype %d (%lld x %lld x %lld): error %g\n", kind, dt,
                (long long)n, (long long)m, (long long)d, worst);
    CHECK(worst <= tol);
    gsb__tensor_free(&X);
    gsb__tensor_free(&Y);
    gsb__tensor_free(&K);
    free(x);
    free(y);
}

static void test_kernel_op(void)
{
    testing_seed(11);
    for (int kind = 0; kind < 4; kind++)
        for (int f = 0; f < 2; f++) {
            gsb_dtype dt = f ? GSB_F64 : GSB_F32;
            kernel_case(dt, kind, 1, 700, 5);    /* one row: the solver's path */
            kernel_case(dt, kind, 3, 37, 1);
            kernel_case(dt, kind, 77, 600, 9);   /* GEMM tiles, ragged edges */
            kernel_case(dt, kind, 20, 1, 4);
        }
    /* bad arguments */
    const gsb__backend *be = gsb__cpu_backend();
    gsb__tensor X, Y, K;
    CHECK_OK(gsb__tensor_alloc(be, GSB_F64, 2, 3, &X));
    CHECK_OK(gsb__tensor_alloc(be, GSB_F32, 2, 3, &Y));
    CHECK_OK(gsb__tensor_alloc(be, GSB_F64, 2, 2, &K));
    CHECK_ERR(be->ops->kernel(be, &X, &Y, 2, 1.0, 0.0, 3, &K), GSB_EINTERNAL, "dtype");
    CHECK_ERR(be->ops->kernel(be, &X, &X, 7, 1.0, 0.0, 3, &K), GSB_EINTERNAL, "kind");
    CHECK_ERR(be->ops->kernel(be, &X, &X, 1, 1.0, 0.0, -1, &K), GSB_EINVAL, "degree");
    CHECK_ERR(be->ops->kernel(be, &X, &X, 0, 1.0, 0.0, 3, &X), GSB_EINTERNAL, "shape");
    gsb__tensor_free(&X);
    gsb__tensor_free(&Y);
    gsb__tensor_free(&K);
}

/* ---- SVC against scikit-learn -------------------------------------------------------- */

static void test_svc_binary_rbf(void)
{
    svc_ref B = SVC_REF(B, 2, 5), Bt = SVC_REF(Bt, 2, 5);
    gsb_model *m = fit("SVC", NULL, X1, 40, 3, GSB_F64, Y1, NULL);
    if (m) {
        check_svc(m, &B, T1, 3, 1e-6, 1);
        double v[2];
        gsb_dtype dt;
        CHECK_CLOSE(internal_scalar(m, "_gamma"), B_gamma, 1e-10);
        CHECK(attr(m, "classes_", v, 2, &dt, NULL) == 2);
        CHECK(dt == GSB_F64 && v[0] == 1 && v[1] == 3);
        CHECK(attr(m, "fit_status_", v, 1, NULL, NULL) == 1 && v[0] == 0);
        CHECK(attr(m, "shape_fit_", v, 2, NULL, NULL) == 2 && v[0] == 40 && v[1] == 3);
        /* the equality constraint of the dual: sum of y alpha is 0 */
        double dual[64], s = 0;
        int64_t nsv = attr(m, "dual_coef_", dual, 64, NULL, NULL);
        for (int64_t i = 0; i < nsv; i++)
            s += dual[i];
        CHECK(fabs(s) < 1e-9);
        /* score is the accuracy of predict */
        gsb_array xa = gsb_array_2d((void *)X1, GSB_F64, 40, 3);
        gsb_array ya = gsb_array_1d((void *)Y1, GSB_F64, 40);
        const gsb_array *in[2] = {&xa, &ya};
        gsb_result *r = NULL;
        double pred[40];
        CHECK(call(m, "predict", &xa, pred, 40, NULL) == 40);
        CHECK_OK(gsb_model_call(m, "score", in, 2, NULL, &r));
        if (r) {
            int right = 0;
            for (int i = 0; i < 40; i++)
                right += pred[i] == Y1[i];
            CHECK_CLOSE(testing_at(gsb_result_get(r, "score"), 0), right / 40.0, 1e-12);
            gsb_result_free(r);
        }
        gsb_model_free(m);
    }
    m = fit("SVC", "{\"tol\": 1e-6}", X1, 40, 3, GSB_F64, Y1, NULL);
    if (m) {
        check_svc(m, &Bt, T1, 3, 1e-6, 1);
        gsb_model_free(m);
    }
    /* without shrinking the iterates differ but the optimum is the same */
    m = fit("SVC", "{\"tol\": 1e-6, \"shrinking\": false}", X1, 40, 3, GSB_F64, Y1, NULL);
    if (m) {
        check_svc(m, &Bt, T1, 3, 1e-4, 0);
        gsb_model_free(m);
    }
    /* float32 X: float32 kernels, float64 attributes and outputs */
    m = fit("SVC", "{\"tol\": 1e-6}", X1, 40, 3, GSB_F32, Y1, NULL);
    if (m) {
        check_svc(m, &Bt, T1, 3, 1e-4, 0);
        gsb_model_free(m);
    }
}

static void test_svc_kernels(void)
{
    svc_ref L = SVC_REF(L, 2, 5), P = SVC_REF(P, 2, 5), Sg = SVC_REF(S, 2, 5);
    L.coef = L_coef;
    gsb_model *m = fit("SVC", "{\"kernel\": \"linear\", \"C\": 0.5}", X1, 40, 3, GSB_F64, Y1,
                       NULL);
    if (m) {
        check_svc(m, &L, T1, 3, 1e-6, 1);
        gsb_model_free(m);
    }
    m = fit("SVC", "{\"kernel\": \"poly\", \"degree\": 3, \"coef0\": 1.0, \"gamma\": \"auto\", "
            "\"C\": 2.0}", X1, 40, 3, GSB_F64, Y1, NULL);
    if (m) {
        check_svc(m, &P, T1, 3, 1e-6, 1);
        CHECK(internal_scalar(m, "_gamma") == 1.0 / 3);
        gsb_model_free(m);
    }
    m = fit("SVC", "{\"kernel\": \"sigmoid\", \"gamma\": 0.2, \"coef0\": -0.5}", X1, 40, 3,
            GSB_F64, Y1, NULL);
    if (m) {
        check_svc(m, &Sg, T1, 3, 1e-6, 1);
        gsb_model_free(m);
    }
}

static void test_svc_multiclass(void)
{
    svc_ref M = SVC_REF(M, 3, 6);
    gsb_model *m = fit("SVC", "{\"C\": 3.0}", X2, 45, 2, GSB_F64, Y2, NULL);
    if (!m)
        return;
    check_svc(m, &M, T2, 2, 1e-6, 1);
    double buf[64];
    int nd;
    gsb_array t = gsb_array_2d((void *)T2, GSB_F64, 6, 2);
    CHECK_OK(gsb_model_set_params(m, "{\"decision_function_shape\": \"ovo\"}"));
    CHECK(call(m, "decision_function", &t, buf, 64, &nd) == 18);
    CHECK(nd == 2);
    CHECK(testing_relerr(buf, M_dec_ovo, 18) <= 1e-6);
    CHECK(call(m, "predict", &t, buf, 64, NULL) == 6);
    for (int i = 0; i < 6; i++)
        CHECK(buf[i] == M_pred[i]);
    CHECK_OK(gsb_model_set_params(m, "{\"break_ties\": true}"));
    const gsb_array *in[1] = {&t};
    CHECK_ERR(gsb_model_call(m, "predict", in, 1, NULL, NULL), GSB_EINVAL,
              "break_ties must be False when decision_function_shape is 'ovo'");
    CHECK_OK(gsb_model_set_params(m, "{\"decision_function_shape\": \"ovr\"}"));
    CHECK(call(m, "predict", &t, buf, 64, NULL) == 6);
    for (int i = 0; i < 6; i++)
        CHECK(buf[i] == M_pred_bt[i]);
    /* predict (votes) agrees with the argmax of the ovr decision function on
     * the training points, where ties are rare */
    CHECK_OK(gsb_model_set_params(m, "{\"break_ties\": false}"));
    gsb_array xa = gsb_array_2d((void *)X2, GSB_F64, 45, 2);
    double dec[135], pred[45];
    CHECK(call(m, "decision_function", &xa, dec, 135, NULL) == 135);
    CHECK(call(m, "predict", &xa, pred, 45, NULL) == 45);
    for (int i = 0; i < 45; i++) {
        int best = 0;
        for (int k = 1; k < 3; k++)
            if (dec[i * 3 + k] > dec[i * 3 + best])
                best = k;
        CHECK(pred[i] == best);
    }
    gsb_model_free(m);
}

static void test_svc_weights(void)
{
    svc_ref W = SVC_REF(W, 3, 6), Z = SVC_REF(Z, 3, 6);
    W.coef = W_coef;
    double X3[35 * 2], y3[35];
    take_rows(X2, 2, I3, 35, X3);
    for (int i = 0; i < 35; i++)
        y3[i] = Y2[I3[i]];
    gsb_model *m = fit("SVC", "{\"class_weight\": \"balanced\", \"kernel\": \"linear\"}", X3, 35,
                       2, GSB_F64, y3, NULL);
    if (m) {
        check_svc(m, &W, T2, 2, 1e-6, 1);
        double cw[3];
        CHECK(attr(m, "class_weight_", cw, 3, NULL, NULL) == 3);
        CHECK(testing_relerr(cw, W_cw, 3) <= 1e-10);
        gsb_model_free(m);
    }
    /* class_weight dict times sample weights, three of them 0 (dropped:
     * support_ indexes the 42 remaining samples, as scikit-learn's) */
    m = fit("SVC", "{\"class_weight\": {\"0\": 2.0, \"2\": 0.5}}", X2, 45, 2, GSB_F64, Y2, SW);
    if (m) {
        check_svc(m, &Z, T2, 2, 1e-6, 1);
        gsb_model_free(m);
    }
    /* integer sample weights act as repeated samples */
    double w[45], Xr[90 * 2], yr[90];
    int nr = 0;
    for (int i = 0; i < 45; i++) {
        w[i] = i % 2 + 1;
        for (int r = 0; r < (int)w[i]; r++, nr++) {
            memcpy(Xr + nr * 2, X2 + i * 2, 2 * sizeof(double));
            yr[nr] = Y2[i];
        }
    }
    gsb_model *a = fit("SVC", "{\"tol\": 1e-8, \"kernel\": \"linear\"}", X2, 45, 2, GSB_F64, Y2,
                       w);
    gsb_model *b = fit("SVC", "{\"tol\": 1e-8, \"kernel\": \"linear\"}", Xr, nr, 2, GSB_F64, yr,
                       NULL);
    if (a && b) {
        double ca[6], cb[6], ia[3], ib[3];
        CHECK(attr(a, "coef_", ca, 6, NULL, NULL) == 6 && attr(b, "coef_", cb, 6, NULL, NULL) == 6);
        CHECK(testing_relerr(ca, cb, 6) <= 1e-4);
        CHECK(attr(a, "intercept_", ia, 3, NULL, NULL) == 3);
        CHECK(attr(b, "intercept_", ib, 3, NULL, NULL) == 3);
        CHECK(testing_relerr(ia, ib, 3) <= 1e-4);
    }
    gsb_model_free(a);
    gsb_model_free(b);
}

/* ---- SVR against scikit-learn -------------------------------------------------------- */

static void check_svr(gsb_model *m, const int *support, int64_t nsv, const double *dual,
                      double icpt, const double *pred, int niter, double tol)
{
    double buf[256];
    gsb_dtype dt;
    int nd;
    CHECK(attr(m, "support_", buf, 256, &dt, NULL) == nsv);
    CHECK(dt == GSB_I32);
    for (int64_t i = 0; i < nsv; i++)
        CHECK(buf[i] == support[i]);
    CHECK(attr(m, "dual_coef_", buf, 256, NULL, &nd) == nsv);
    CHECK(nd == 2);
    CHECK(testing_relerr(buf, dual, nsv) <= tol);
    CHECK(attr(m, "intercept_", buf, 256, NULL, NULL) == 1);
    CHECK_CLOSE(buf[0], icpt, tol);
    CHECK(attr(m, "n_support_", buf, 256, &dt, NULL) == 1);
    CHECK(dt == GSB_I32 && buf[0] == nsv);
    if (niter >= 0) {
        CHECK(attr(m, "n_iter_", buf, 256, NULL, &nd) == 1);
        CHECK(nd == 0 && buf[0] == niter);
    }
    gsb_array t = gsb_array_2d((void *)T1, GSB_F64, 5, 3);
    CHECK(call(m, "predict", &t, buf, 256, &nd) == 5);
    CHECK(nd == 1);
    CHECK(testing_relerr(buf, pred, 5) <= tol);
}

static void test_svr(void)
{
    gsb_model *m = fit("SVR", NULL, X1, 40, 3, GSB_F64, YS, NULL);
    if (m) {
        check_svr(m, R_support, sizeof R_support / sizeof(int), R_dual, R_icpt[0], R_pred,
                  R_niter, 1e-6);
        /* score is R^2 of predict */
        gsb_array xa = gsb_array_2d((void *)X1, GSB_F64, 40, 3);
        gsb_array ya = gsb_array_1d((void *)YS, GSB_F64, 40);
        const gsb_array *in[2] = {&xa, &ya};
        double pred[40], mean = 0, ss = 0, sr = 0;
        CHECK(call(m, "predict", &xa, pred, 40, NULL) == 40);
        for (int i = 0; i < 40; i++)
            mean += YS[i] / 40;
        for (int i = 0; i < 40; i++) {
            ss += (YS[i] - mean) * (YS[i] - mean);
            sr += (YS[i] - pred[i]) * (YS[i] - pred[i]);
        }
        gsb_result *r = NULL;
        CHECK_OK(gsb_model_call(m, "score", in, 2, NULL, &r));
        if (r) {
            CHECK_CLOSE(testing_at(gsb_result_get(r, "score"), 0), 1 - sr / ss, 1e-10);
            gsb_result_free(r);
        }
        gsb_model_free(m);
    }
    const char *tight = "{\"tol\": 1e-6, \"C\": 3.0, \"epsilon\": 0.05}";
    m = fit("SVR", tight, X1, 40, 3, GSB_F64, YS, NULL);
    if (m) {
        check_svr(m, Rt_support, sizeof Rt_support / sizeof(int), Rt_dual, Rt_icpt[0], Rt_pred,
                  Rt_niter, 1e-6);
        gsb_model_free(m);
    }
    m = fit("SVR", "{\"tol\": 1e-6, \"C\": 3.0, \"epsilon\": 0.05, \"shrinking\": false}", X1,
            40, 3, GSB_F64, YS, NULL);
    if (m) {
        check_svr(m, Rt_support, sizeof Rt_support / sizeof(int), Rt_dual, Rt_icpt[0], Rt_pred,
                  -1, 1e-4);
        gsb_model_free(m);
    }
    m = fit("SVR", tight, X1, 40, 3, GSB_F32, YS, NULL);
    if (m) {
        check_svr(m, Rt_support, sizeof Rt_support / sizeof(int), Rt_dual, Rt_icpt[0], Rt_pred,
                  -1, 1e-4);
        gsb_model_free(m);
    }
    m = fit("SVR", "{\"kernel\": \"linear\", \"C\": 0.7}", X1, 40, 3, GSB_F64, YS, NULL);
    if (m) {
        double buf[8];
        gsb_array t = gsb_array_2d((void *)T1, GSB_F64, 5, 3);
        CHECK(attr(m, "coef_", buf, 8, NULL, NULL) == 3);
        CHECK(testing_relerr(buf, RL_coef, 3) <= 1e-6);
        CHECK(attr(m, "intercept_", buf, 8, NULL, NULL) == 1);
        CHECK_CLOSE(buf[0], RL_icpt[0], 1e-6);
        CHECK(call(m, "predict", &t, buf, 8, NULL) == 5);
        CHECK(testing_relerr(buf, RL_pred, 5) <= 1e-6);
        gsb_model_free(m);
    }
}

/* ---- iris ---------------------------------------------------------------------------- */

static void test_iris_cv(void)
{
    double acc = 0;
    for (int f = 0; f < 5; f++) {
        double Xtr[150 * 4], ytr[150], Xte[150 * 4], yte[150];
        int ntr = 0, nte = 0;
        for (int i = 0; i < 150; i++) {
            if (IRIS_FOLD[i] == f) {
                memcpy(Xte + nte * 4, IRIS_X + i * 4, 4 * sizeof(double));
                yte[nte++] = IRIS_Y[i];
            } else {
                memcpy(Xtr + ntr * 4, IRIS_X + i * 4, 4 * sizeof(double));
                ytr[ntr++] = IRIS_Y[i];
            }
        }
        gsb_model *m = fit("SVC", NULL, Xtr, ntr, 4, GSB_F64, ytr, NULL);
        if (!m)
            return;
        gsb_array xa = gsb_array_2d(Xte, GSB_F64, nte, 4);
        gsb_array ya = gsb_array_1d(yte, GSB_F64, nte);
        const gsb_array *in[2] = {&xa, &ya};
        gsb_result *r = NULL;
        CHECK_OK(gsb_model_call(m, "score", in, 2, NULL, &r));
        if (r)
            acc += testing_at(gsb_result_get(r, "score"), 0) / 5;
        gsb_result_free(r);
        gsb_model_free(m);
    }
    CHECK_CLOSE(acc, IRIS_CV, 1e-12);
}

/* ---- solver behaviour ---------------------------------------------------------------- */

/* A noisy problem that needs a few thousand SMO iterations. */
static void noisy_data(double *X, double *y, int n)
{
    testing_seed(5);
    for (int i = 0; i < n; i++) {
        X[2 * i] = testing_normal();
        X[2 * i + 1] = testing_normal();
        y[i] = (X[2 * i] * X[2 * i + 1] + 0.8 * testing_normal() > 0) ? 1 : 0;
    }
}

/* The cache holds as few as two rows: same answer (the cache is speed only). */
static void test_cache_and_max_iter(void)
{
    enum { n = 300 };
    static double X[2 * n], y[n];
    noisy_data(X, y, n);
    const char *p_big = "{\"C\": 30.0}", *p_tiny = "{\"C\": 30.0, \"cache_size\": 0.001}";
    gsb_model *a = fit("SVC", p_big, X, n, 2, GSB_F64, y, NULL);
    gsb_model *b = fit("SVC", p_tiny, X, n, 2, GSB_F64, y, NULL);
    if (a && b) {
        static double da[n], db[n];
        double ia, ib, ita, itb;
        int64_t na = attr(a, "dual_coef_", da, n, NULL, NULL);
        CHECK(na > 0 && na == attr(b, "dual_coef_", db, n, NULL, NULL));
        CHECK(testing_relerr(da, db, na) == 0);
        CHECK(attr(a, "intercept_", &ia, 1, NULL, NULL) == 1);
        CHECK(attr(b, "intercept_", &ib, 1, NULL, NULL) == 1);
        CHECK(ia == ib);
        CHECK(attr(a, "n_iter_", &ita, 1, NULL, NULL) == 1);
        CHECK(attr(b, "n_iter_", &itb, 1, NULL, NULL) == 1);
        CHECK(ita == itb && ita > 1000);
    }
    gsb_model_free(a);
    gsb_model_free(b);
    /* max_iter stops each pair's solver: fit_status_ 1, n_iter_ == max_iter */
    gsb_model *m = fit("SVC", "{\"C\": 30.0, \"max_iter\": 25}", X, n, 2, GSB_F64, y, NULL);
    if (m) {
        double v;
        CHECK(attr(m, "fit_status_", &v, 1, NULL, NULL) == 1 && v == 1);
        CHECK(attr(m, "n_iter_", &v, 1, NULL, NULL) == 1 && v == 25);
        /* and warns as scikit-learn's _warn_from_fit_status */
        CHECK(strcmp(gsb_warnings(), "[{\"category\":\"ConvergenceWarning\",\"message\":"
                                     "\"Solver terminated early (max_iter=25).  Consider "
                                     "pre-processing your data with StandardScaler or "
                                     "MinMaxScaler.\"}]") == 0);
        gsb_model_free(m);
    }
}

static int progress_calls;
static int64_t progress_last;
static int on_progress(void *data, const char *stage, int64_t it, double gap)
{
    (void)stage;
    progress_calls++;
    progress_last = it;
    CHECK(gap > 0);
    return data != NULL && it >= 1000; /* cancel when asked to */
}

static void test_progress_cancel(void)
{
    enum { n = 300 };
    static double X[2 * n], y[n];
    noisy_data(X, y, n);
    gsb_array xa = gsb_array_2d(X, GSB_F64, n, 2), ya = gsb_array_1d(y, GSB_F64, n);
    gsb_model *m = NULL;
    CHECK_OK(gsb_model_create(S, "SVC", "{\"C\": 30.0}", &m));
    if (!m)
        return;
    gsb_model_set_progress(m, on_progress, NULL);
    progress_calls = 0;
    CHECK_OK(gsb_model_fit(m, &xa, &ya));
    double it = 0;
    CHECK(attr(m, "n_iter_", &it, 1, NULL, NULL) == 1);
    CHECK(progress_calls == (int)it / 1000 && progress_last % 1000 == 0);
    int flag = 1;
    gsb_model_set_progress(m, on_progress, &flag);
    CHECK_ERR(gsb_model_fit(m, &xa, &ya), GSB_ECANCELLED, "cancelled");
    CHECK(!gsb_model_is_fitted(m));
    gsb_model_free(m);
}

/* ---- persistence --------------------------------------------------------------------- */

/* Export m, let edit change its attributes, and import the result. */
static gsb_model *reimport(gsb_model *m, void (*edit)(gsb__nlist *))
{
    void *blob = NULL;
    size_t len = 0;
    CHECK_OK(gsb_model_export(m, &blob, &len));
    if (!blob)
        return NULL;
    char *est = NULL;
    json_t *params = NULL;
    gsb__nlist attrs = {0};
    int fitted = 0;
    gsb_model *back = NULL;
    CHECK_OK(gsb__blob_read(blob, len, &est, &params, &attrs, &fitted));
    gsb_free(blob);
    blob = NULL;
    if (est && edit) {
        edit(&attrs);
        CHECK_OK(gsb__blob_write(est, params, &attrs, fitted, &blob, &len));
    } else if (est) {
        CHECK_OK(gsb__blob_write(est, params, &attrs, fitted, &blob, &len));
    }
    if (blob)
        CHECK_OK(gsb_model_import(S, blob, len, &back));
    free(blob);
    free(est);
    json_decref(params);
    gsb__nlist_clear(&attrs);
    return back;
}

static void put_i32(gsb__nlist *l, const char *name, const int32_t *v, int64_t n)
{
    gsb__tensor t;
    if (gsb__tensor_alloc(gsb__cpu_backend(), GSB_I32, n, 1, &t) != GSB_OK)
        return;
    memcpy(t.data, v, (size_t)n * sizeof *v);
    gsb__tensor_as_1d(&t);
    gsb__nlist_put(l, name, &t);
}

static void edit_nsupport(gsb__nlist *l)
{
    const int32_t bad[3] = {1000, -990, 1};
    put_i32(l, "n_support_", bad, 3);
}

static void edit_nsupport_shape(gsb__nlist *l)
{
    const int32_t bad[2] = {1, 1};
    put_i32(l, "n_support_", bad, 2);
}

static void edit_gamma(gsb__nlist *l)
{
    gsb__tensor t;
    if (gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, 1, 1, &t) != GSB_OK)
        return;
    ((double *)t.data)[0] = -1;
    t.ndim = 0;
    gsb__nlist_put(l, "_gamma", &t);
}

static void edit_drop_dual(gsb__nlist *l)
{
    gsb__tensor t;
    if (gsb__tensor_alloc(gsb__cpu_backend(), GSB_F64, 2, 3, &t) != GSB_OK)
        return;
    memset(t.data, 0, 6 * sizeof(double));
    gsb__nlist_put(l, "dual_coef_", &t);
}

static void test_blob(void)
{
    gsb_model *m = fit("SVC", "{\"C\": 3.0}", X2, 45, 2, GSB_F64, Y2, NULL);
    if (!m)
        return;
    gsb_array t = gsb_array_2d((void *)T2, GSB_F64, 6, 2);
    const gsb_array *in[1] = {&t};
    double want[18], got[18];
    CHECK(call(m, "decision_function", &t, want, 18, NULL) == 18);
    gsb_model *back = reimport(m, NULL);
    if (back) {
        CHECK(call(back, "decision_function", &t, got, 18, NULL) == 18);
        CHECK(memcmp(want, got, sizeof want) == 0);
        gsb_model_free(back);
    }
    void (*edits[])(gsb__nlist *) = {edit_nsupport, edit_nsupport_shape, edit_gamma,
                                     edit_drop_dual};
    for (size_t e = 0; e < sizeof edits / sizeof edits[0]; e++) {
        back = reimport(m, edits[e]);
        if (!back)
            continue;
        CHECK_ERR(gsb_model_call(back, "predict", in, 1, NULL, NULL), GSB_ECORRUPT, "SVC");
        CHECK_ERR(gsb_model_call(back, "decision_function", in, 1, NULL, NULL), GSB_ECORRUPT,
                  "SVC");
        gsb_model_free(back);
    }
    gsb_model_free(m);

    m = fit("SVR", NULL, X1, 40, 3, GSB_F64, YS, NULL);
    if (!m)
        return;
    gsb_array t1 = gsb_array_2d((void *)T1, GSB_F64, 5, 3);
    const gsb_array *in1[1] = {&t1};
    back = reimport(m, edit_nsupport);
    if (back) {
        CHECK_ERR(gsb_model_call(back, "predict", in1, 1, NULL, NULL), GSB_ECORRUPT, "SVR");
        gsb_model_free(back);
    }
    gsb_model_free(m);
}

/* ---- errors -------------------------------------------------------------------------- */

static void test_errors(void)
{
    gsb_model *m = NULL;
    CHECK_ERR(gsb_model_create(S, "SVC", "{\"C\": 0}", &m), GSB_EPARAM,
              "The 'C' parameter of SVC must be a float in the range (0.0, inf]");
    CHECK_ERR(gsb_model_create(S, "SVC", "{\"kernel\": \"cubic\"}", &m), GSB_EPARAM,
              "The 'kernel' parameter of SVC");
    CHECK_ERR(gsb_model_create(S, "SVC", "{\"gamma\": -1.0}", &m), GSB_EPARAM,
              "The 'gamma' parameter of SVC");
    CHECK_ERR(gsb_model_create(S, "SVR", "{\"epsilon\": -0.1}", &m), GSB_EPARAM,
              "The 'epsilon' parameter of SVR");
    CHECK_ERR(gsb_model_create(S, "SVC", "{\"max_iter\": -2}", &m), GSB_EPARAM,
              "The 'max_iter' parameter of SVC");
    CHECK_ERR(gsb_model_create(S, "SVR", "{\"class_weight\": \"balanced\"}", &m), GSB_EPARAM,
              "Invalid parameter 'class_weight' for estimator SVR()");

    gsb_array xa = gsb_array_2d((void *)X1, GSB_F64, 40, 3), ya = gsb_array_1d((void *)Y1,
                                                                             GSB_F64, 40);
    CHECK_OK(gsb_model_create(S, "SVC", "{\"kernel\": \"precomputed\"}", &m));
    CHECK_ERR(gsb_model_fit(m, &xa, &ya), GSB_EINVAL,
              "Precomputed matrix must be a square matrix. Input is a 40x3 matrix.");
    gsb_model_free(m);
    /* a Python callable, as the Python package sends it, is refused by name */
    CHECK_ERR(gsb_model_create(S, "SVC", "{\"kernel\": {\"__callable__\": \"<function k>\"}}",
                               &m),
              GSB_EPARAM, "The 'kernel' parameter of SVC must be a str among {'linear', "
              "'poly', 'rbf', 'sigmoid', 'precomputed'}. Got <function k> instead. Callables "
              "are not supported by gsb");
    CHECK_ERR(gsb_model_create(S, "SVR", "{\"kernel\": {\"__callable__\": \"f\"}}", &m),
              GSB_EPARAM, "pass it with 'precomputed' instead.");

    CHECK_OK(gsb_model_create(S, "SVC", NULL, &m));
    gsb_array t = gsb_array_2d((void *)T1, GSB_F64, 5, 3);
    const gsb_array *tin[1] = {&t};
    CHECK_ERR(gsb_model_call(m, "predict", tin, 1, NULL, NULL), GSB_ENOTFITTED, "not fitted");
    double ones[40];
    for (int i = 0; i < 40; i++)
        ones[i] = 1;
    gsb_array y1c = gsb_array_1d(ones, GSB_F64, 40);
    CHECK_ERR(gsb_model_fit(m, &xa, &y1c), GSB_EINVAL,
              "The number of classes has to be greater than one; got 1 class");
    double cont[40];
    for (int i = 0; i < 40; i++)
        cont[i] = 0.5 * i;
    gsb_array yc = gsb_array_1d(cont, GSB_F64, 40);
    CHECK_ERR(gsb_model_fit(m, &xa, &yc), GSB_EINVAL, "Unknown label type: continuous");
    double xn[120];
    memcpy(xn, X1, sizeof xn);
    xn[7] = NAN;
    gsb_array xna = gsb_array_2d(xn, GSB_F64, 40, 3);
    CHECK_ERR(gsb_model_fit(m, &xna, &ya), GSB_EINVAL, "NaN");
    double zero[40] = {0};
    gsb_array wz = gsb_array_1d(zero, GSB_F64, 40);
    const gsb_array *fin[3] = {&xa, &ya, &wz};
    CHECK_ERR(gsb_model_call(m, "fit", fin, 3, NULL, NULL), GSB_EINVAL,
              "Invalid input - all samples have zero or negative weights.");
    double w1[40];
    for (int i = 0; i < 40; i++)
        w1[i] = Y1[i] == 1 ? 0 : 1;
    gsb_array w1a = gsb_array_1d(w1, GSB_F64, 40);
    fin[2] = &w1a;
    CHECK_ERR(gsb_model_call(m, "fit", fin, 3, NULL, NULL), GSB_EINVAL,
              "Invalid input - all samples with positive weights belong to the same class.");
    CHECK_OK(gsb_model_fit(m, &xa, &ya));
    gsb_array x2 = gsb_array_2d((void *)X2, GSB_F64, 45, 2);
    const gsb_array *x2in[1] = {&x2};
    CHECK_ERR(gsb_model_call(m, "predict", x2in, 1, NULL, NULL), GSB_EINVAL,
              "X has 2 features, but SVC is expecting 3 features as input.");
    CHECK_OK(gsb_model_set_params(m, "{\"break_ties\": true, \"decision_function_shape\": "
                                     "\"ovo\"}"));
    CHECK_ERR(gsb_model_call(m, "predict", tin, 1, NULL, NULL), GSB_EINVAL,
              "break_ties must be False");
    gsb_model_free(m);

    /* a class whose samples all weigh 0 */
    double w2[45];
    for (int i = 0; i < 45; i++)
        w2[i] = Y2[i] == 2 ? 0 : 1;
    gsb_array x2a = gsb_array_2d((void *)X2, GSB_F64, 45, 2), y2a = gsb_array_1d((void *)Y2,
                                                                               GSB_F64, 45);
    gsb_array w2a = gsb_array_1d(w2, GSB_F64, 45);
    const gsb_array *f2[3] = {&x2a, &y2a, &w2a};
    CHECK_OK(gsb_model_create(S, "SVC", NULL, &m));
    CHECK_ERR(gsb_model_call(m, "fit", f2, 3, NULL, NULL), GSB_EINVAL, "class 2.0");
    CHECK_OK(gsb_model_set_params(m, "{\"class_weight\": {\"0\": 2, \"5\": 1}}"));
    CHECK_ERR(gsb_model_fit(m, &x2a, &y2a), GSB_EINVAL,
              "The classes, [1, 2], are not in class_weight");
    gsb_model_free(m);

    CHECK_OK(gsb_model_create(S, "SVR", NULL, &m));
    double y2d[80];
    for (int i = 0; i < 80; i++)
        y2d[i] = i;
    gsb_array y2da = gsb_array_2d(y2d, GSB_F64, 40, 2);
    CHECK_ERR(gsb_model_fit(m, &xa, &y2da), GSB_EINVAL, "y should be a 1d array");
    gsb_model_free(m);
}

/* ---- probability=True ------------------------------------------------------------ */

/* SVC.fit's libsvm seed: numpy's RandomState(random_state).randint(2**31 - 1) */
static void test_libsvm_seed(void)
{
    CHECK(gsb__libsvm_seed_for(0) == 209652396u);
    CHECK(gsb__libsvm_seed_for(1) == 1791095845u);
    CHECK(gsb__libsvm_seed_for(42) == 1608637542u);
    /* std::mt19937 with its default seed: the 10000th output is 4123659995 */
    gsb__mt19937 g;
    gsb__mt19937_seed(&g, 5489u);
    uint32_t v = 0;
    for (int i = 0; i < 10000; i++)
        v = gsb__mt19937_next(&g);
    CHECK(v == 4123659995u);
    for (uint32_t range = 1; range < 50; range++)
        CHECK(gsb__libsvm_bounded(&g, range) < range);
}

/*
 * scikit-learn's answers, from the script at the top:
 *   m = SVC(probability=True, C=3.0, random_state=0).fit(X2, y2)      (T2)
 *   b = SVC(probability=True, kernel="linear", random_state=5).fit(X1, y1)   (T1)
 * m._probA, m._probB, m.predict_proba(T2); likewise b.  The folds are
 * libsvm's with the same seed, so the answers agree to rounding (~1e-14 on
 * the CPU; PROBA_TOL leaves room for the GPU's kernel values, GSB_DEVICE=cuda).
 */
#define PROBA_TOL 1e-7
static void test_probability(void)
{
    static const double M_A[3] = {-2.1367050341137666, -2.397518025515594,
                                  -1.9228267586275694};
    static const double M_B[3] = {-0.2845047215568864, -0.15289960440484823,
                                  0.30852696392856727};
    static const double M_P[18] = {
        0.08019966260154619, 0.15424841669673256, 0.7655519207017211, 0.02815841814668649,
        0.030495271301613888, 0.9413463105516993, 0.03949203685335251, 0.050922018814498045,
        0.9095859443321491, 0.04157381700060935, 0.44747505249938263, 0.5109511305000083,
        0.14601171893640888, 0.07693307102080488, 0.7770552100427861, 0.7711126826262783,
        0.046471221970953144, 0.18241609540276835};
    static const double B_A = -1.1318501142127955, B_B = 0.03516699823571522;
    static const double B_P[10] = {
        0.5185417018685772, 0.4814582981314229, 0.8595741087694294, 0.14042589123057056,
        0.9012413356680272, 0.09875866433197288, 0.686654966688646, 0.31334503331135394,
        0.7511056194699481, 0.24889438053005192};
    double v[32];
    gsb_model *m = fit("SVC", "{\"probability\": true, \"C\": 3.0, \"random_state\": 0}", X2,
                       45, 2, GSB_F64, Y2, NULL);
    /* the deprecated parameter, given, warns as scikit-learn 1.9 does */
    CHECK(strstr(gsb_warnings(), "\"FutureWarning\",\"message\":\"The `probability` "
                                 "parameter was deprecated in 1.9") != NULL);
    if (m) {
        CHECK(attr(m, "probA_", v, 32, NULL, NULL) == 3 && testing_relerr(v, M_A, 3) < PROBA_TOL);
        CHECK(attr(m, "probB_", v, 32, NULL, NULL) == 3 && testing_relerr(v, M_B, 3) < PROBA_TOL);
        gsb_array t = gsb_array_2d((void *)T2, GSB_F64, 6, 2);
        CHECK(call(m, "predict_proba", &t, v, 32, NULL) == 18);
        CHECK(testing_relerr(v, M_P, 18) < PROBA_TOL);
        double lp[18];
        CHECK(call(m, "predict_log_proba", &t, lp, 18, NULL) == 18);
        for (int i = 0; i < 18; i++)
            CHECK_CLOSE(lp[i], log(v[i]), 1e-12);
        /* without probability=True now, predict_proba is absent (AttributeError) */
        CHECK_OK(gsb_model_set_params(m, "{\"probability\": false}"));
        const gsb_array *tin[1] = {&t};
        CHECK_ERR(gsb_model_call(m, "predict_proba", tin, 1, NULL, NULL), GSB_ENOTFOUND,
                  "predict_proba is not available when probability=False");
        gsb_model_free(m);
    }
    m = fit("SVC", "{\"probability\": true, \"kernel\": \"linear\", \"random_state\": 5}", X1,
            40, 3, GSB_F64, Y1, NULL);
    if (m) {
        CHECK(attr(m, "probA_", v, 32, NULL, NULL) == 1 && fabs(v[0] - B_A) < PROBA_TOL);
        CHECK(attr(m, "probB_", v, 32, NULL, NULL) == 1 && fabs(v[0] - B_B) < PROBA_TOL);
        gsb_array t = gsb_array_2d((void *)T1, GSB_F64, 5, 3);
        CHECK(call(m, "predict_proba", &t, v, 32, NULL) == 10);
        CHECK(testing_relerr(v, B_P, 10) < PROBA_TOL);
        gsb_model_free(m);
    }
    /* fitted without it, probA_ is empty and predict_proba says so */
    m = fit("SVC", NULL, X2, 45, 2, GSB_F64, Y2, NULL);
    if (m) {
        CHECK(strcmp(gsb_warnings(), "[]") == 0);
        CHECK(attr(m, "probA_", v, 32, NULL, NULL) == 0);
        CHECK_OK(gsb_model_set_params(m, "{\"probability\": true}"));
        gsb_array t = gsb_array_2d((void *)T2, GSB_F64, 6, 2);
        const gsb_array *tin[1] = {&t};
        CHECK_ERR(gsb_model_call(m, "predict_proba", tin, 1, NULL, NULL), GSB_ENOTFITTED,
                  "predict_proba is not available when fitted with probability=False");
        gsb_model_free(m);
    }
}

/* random_state None: fresh folds, yet probabilities that still sum to one and
 * follow the decision; an int: the same model twice. */
static void test_probability_random_state(void)
{
    double a[3], b[3], p[18];
    gsb_model *m1 = fit("SVC", "{\"probability\": true, \"random_state\": 9}", X2, 45, 2,
                        GSB_F64, Y2, NULL);
    gsb_model *m2 = fit("SVC", "{\"probability\": true, \"random_state\": 9}", X2, 45, 2,
                        GSB_F64, Y2, NULL);
    gsb_model *m3 = fit("SVC", "{\"probability\": true}", X2, 45, 2, GSB_F64, Y2, NULL);
    if (m1 && m2 && m3) {
        CHECK(attr(m1, "probA_", a, 3, NULL, NULL) == 3);
        CHECK(attr(m2, "probA_", b, 3, NULL, NULL) == 3);
        CHECK(memcmp(a, b, sizeof a) == 0);
        gsb_array t = gsb_array_2d((void *)T2, GSB_F64, 6, 2);
        CHECK(call(m3, "predict_proba", &t, p, 18, NULL) == 18);
        for (int i = 0; i < 6; i++) {
            CHECK_CLOSE(p[3 * i] + p[3 * i + 1] + p[3 * i + 2], 1.0, 1e-9);
            for (int k = 0; k < 3; k++)
                CHECK(p[3 * i + k] > 0 && p[3 * i + k] < 1);
        }
    }
    gsb_model_free(m1);
    gsb_model_free(m2);
    gsb_model_free(m3);
}

/* ---- kernel='precomputed' ------------------------------------------------------- */

/* K (r x c) = exp(-gamma |a_i - b_j|^2) */
static void rbf_gram(const double *A, int64_t r, const double *B, int64_t c, int64_t d,
                     double gamma, double *K)
{
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++) {
            double s = 0;
            for (int64_t f = 0; f < d; f++)
                s += (A[i * d + f] - B[j * d + f]) * (A[i * d + f] - B[j * d + f]);
            K[i * c + j] = exp(-gamma * s);
        }
}

/* The Gram matrix gives the rbf kernel's model: same support, coefficients,
 * decisions; zero sample weights read the right columns. */
static void test_precomputed(void)
{
    static double K[45 * 45], KT[6 * 45], w[45];
    rbf_gram(X2, 45, X2, 45, 2, 0.5, K);
    rbf_gram(T2, 6, X2, 45, 2, 0.5, KT);
    for (int i = 0; i < 45; i++)
        w[i] = i % 7 == 3 ? 0 : 1 + 0.1 * (i % 4);
    for (int weighted = 0; weighted < 2; weighted++) {
        gsb_model *a = fit("SVC", "{\"gamma\": 0.5}", X2, 45, 2, GSB_F64, Y2, weighted ? w : NULL);
        gsb_model *b = fit("SVC", "{\"kernel\": \"precomputed\"}", K, 45, 45, GSB_F64, Y2,
                           weighted ? w : NULL);
        if (!a || !b) {
            gsb_model_free(a);
            gsb_model_free(b);
            continue;
        }
        double da[64], db[64], sa[64], sb[64];
        int64_t n = attr(a, "dual_coef_", da, 64, NULL, NULL);
        CHECK(n > 0 && n == attr(b, "dual_coef_", db, 64, NULL, NULL));
        CHECK(testing_relerr(db, da, n) < 1e-9);
        CHECK(attr(a, "support_", sa, 64, NULL, NULL) == attr(b, "support_", sb, 64, NULL, NULL));
        CHECK(memcmp(sa, sb, (size_t)(n / 2) * sizeof *sa) == 0);
        gsb_array info;
        CHECK(testing_attr(b, "support_vectors_", da, 64, &info) == 0);
        CHECK(info.ndim == 2 && info.shape[0] == 0 && info.shape[1] == 0);
        CHECK(!testing_has_attr(b, "_support_cols")); /* hidden */
        gsb_array t = gsb_array_2d((void *)T2, GSB_F64, 6, 2);
        gsb_array kt = gsb_array_2d(KT, GSB_F64, 6, 45);
        CHECK(call(a, "decision_function", &t, da, 64, NULL) == 18);
        CHECK(call(b, "decision_function", &kt, db, 64, NULL) == 18);
        CHECK(testing_relerr(db, da, 18) < 1e-9);
        /* predict takes n_test x n_train */
        const gsb_array *bad[1] = {&t};
        CHECK_ERR(gsb_model_call(b, "predict", bad, 1, NULL, NULL), GSB_EINVAL,
                  "X has 2 features, but SVC is expecting 45 features as input.");
        gsb_model_free(a);
        gsb_model_free(b);
    }
    /* SVR alike */
    double ys[45];
    for (int i = 0; i < 45; i++)
        ys[i] = sin(X2[2 * i]) + 0.3 * X2[2 * i + 1];
    gsb_model *a = fit("SVR", "{\"gamma\": 0.5}", X2, 45, 2, GSB_F64, ys, w);
    gsb_model *b = fit("SVR", "{\"kernel\": \"precomputed\"}", K, 45, 45, GSB_F64, ys, w);
    if (a && b) {
        double pa[6], pb[6];
        gsb_array t = gsb_array_2d((void *)T2, GSB_F64, 6, 2);
        gsb_array kt = gsb_array_2d(KT, GSB_F64, 6, 45);
        CHECK(call(a, "predict", &t, pa, 6, NULL) == 6);
        CHECK(call(b, "predict", &kt, pb, 6, NULL) == 6);
        CHECK(testing_relerr(pb, pa, 6) < 1e-9);
    }
    gsb_model_free(a);
    gsb_model_free(b);
}

int main(void)
{
    if (testing_open(&S))
        return 1;
    RUN(test_kernel_op);
    RUN(test_svc_binary_rbf);
    RUN(test_svc_kernels);
    RUN(test_svc_multiclass);
    RUN(test_svc_weights);
    RUN(test_svr);
    RUN(test_iris_cv);
    RUN(test_cache_and_max_iter);
    RUN(test_progress_cancel);
    RUN(test_blob);
    RUN(test_errors);
    RUN(test_libsvm_seed);
    RUN(test_probability);
    RUN(test_probability_random_state);
    RUN(test_precomputed);
    return testing_close(S);
}
