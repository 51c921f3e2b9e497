/* registry.c - the table of every estimator compiled into the engine. */
#include <string.h>

#include "core/estimator.h"

extern const gsb__estimator_desc gsb__est_StandardScaler, gsb__est_MinMaxScaler,
    gsb__est_LabelEncoder, gsb__est_LinearRegression, gsb__est_Ridge,
    gsb__est_LogisticRegression, gsb__est_PCA, gsb__est_TruncatedSVD, gsb__est_KMeans,
    gsb__est_NearestNeighbors, gsb__est_KNeighborsClassifier, gsb__est_KNeighborsRegressor,
    gsb__est_SVC, gsb__est_SVR, gsb__est_Lasso, gsb__est_ElasticNet,
    gsb__est_LassoCV, gsb__est_ElasticNetCV, gsb__est_TSNE, gsb__est_RandomForestClassifier,
    gsb__est_RandomForestRegressor, gsb__est_DBSCAN, gsb__est_UMAP;

static const gsb__estimator_desc *const registry[] = {
    &gsb__est_StandardScaler,   &gsb__est_MinMaxScaler,    &gsb__est_LabelEncoder,
    &gsb__est_LinearRegression, &gsb__est_Ridge,           &gsb__est_LogisticRegression,
    &gsb__est_PCA,              &gsb__est_TruncatedSVD,    &gsb__est_KMeans,
    &gsb__est_NearestNeighbors, &gsb__est_KNeighborsClassifier,
    &gsb__est_KNeighborsRegressor, &gsb__est_SVC,          &gsb__est_SVR,
    &gsb__est_Lasso,            &gsb__est_ElasticNet,      &gsb__est_LassoCV,
    &gsb__est_ElasticNetCV,
    &gsb__est_TSNE,
    &gsb__est_RandomForestClassifier, &gsb__est_RandomForestRegressor,
    &gsb__est_DBSCAN,
    &gsb__est_UMAP,
};

const gsb__estimator_desc *gsb__registry_find(const char *name)
{
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
        if (strcmp(registry[i]->name, name) == 0)
            return registry[i];
    return NULL;
}

const gsb__estimator_desc *const *gsb__registry_all(int *count)
{
    *count = (int)(sizeof registry / sizeof registry[0]);
    return registry;
}

const gsb__method_desc *gsb__method_find(const gsb__estimator_desc *est, const char *name)
{
    for (const gsb__method_desc *m = est->methods; m->name; m++)
        if (strcmp(m->name, name) == 0)
            return m;
    return NULL;
}
