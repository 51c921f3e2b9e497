/*
 * classes.h - class labels and class weights, shared by the classifiers
 * (LogisticRegression, SVC, KNeighborsClassifier).
 *
 * Labels arrive as a GSB__IN_LABELS input: a 1-D float64 tensor of finite
 * values.  The classifiers all need scikit-learn's view of them: the check
 * that they are classes at all (check_classification_targets), the sorted
 * unique classes_ and each sample's index into classes_ (LabelEncoder),
 * and the class_weight parameter turned into one weight per class
 * (compute_class_weight).  Written once here so that the three agree.
 */
#ifndef GSB_ESTIMATORS_COMMON_CLASSES_H
#define GSB_ESTIMATORS_COMMON_CLASSES_H

#include <stdint.h>

#include "core/estimator.h"

/*
 * scikit-learn's check_classification_targets: a non-integral value makes
 * y 'continuous', which a classifier refuses (GSB_EINVAL, sklearn's words).
 */
int gsb__labels_check(const gsb__tensor *y);

/*
 * The classes of y: *classes (sorted unique values, malloc'ed, *n_classes of
 * them) and index[i] (y->rows entries, caller's) the position of y[i] in
 * *classes.  Checks y as gsb__labels_check first.  Messages name c's
 * estimator; on error nothing is allocated.
 */
int gsb__labels_encode(const gsb__ctx *c, const gsb__tensor *y, double **classes,
                       int64_t *n_classes, int32_t *index);

/*
 * Whether the class_weight parameter is set (not absent or None).
 */
int gsb__class_weight_given(const gsb__ctx *c);

/*
 * cw[k], the weight of class k, from the class_weight parameter, as
 * scikit-learn's compute_class_weight(class_weight, classes=classes, y=y,
 * sample_weight=sw) gives it:
 *  - None: ones;
 *  - 'balanced': sum(w) / (K * sum of w over class k), w = sw, or ones
 *    when sw is NULL (SVC counts samples, ignoring sample_weight); a class
 *    whose samples all weigh 0 gets 0 (scikit-learn would give inf or NaN);
 *  - an object {key: weight}: a key is a class value written as a number
 *    ("1", "2.0") and stands for int(class); classes without a key weigh 1,
 *    but then every key must have matched a class, else "The classes, [..],
 *    are not in class_weight".
 * yi (n entries) are the samples' class indices, as gsb__labels_encode
 * gives them.  No check of the values' sign or finiteness: callers differ.
 */
int gsb__class_weights(const gsb__ctx *c, const double *classes, int64_t n_classes,
                       const int32_t *yi, int64_t n, const double *sw, double *cw);

#endif
