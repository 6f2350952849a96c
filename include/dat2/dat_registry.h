/* dat_registry.h — written for this project; ABI-compatible with DAT 2.0 */
#ifndef _DAT_REGISTRY_H_
#define _DAT_REGISTRY_H_

/*
 * Registry API seen by providers (not by consumers): how a provider library
 * announces itself to libdat2 and the entry points libdat2 looks up in it.
 */

/* The provider table is user/kernel specific; only user space is built. */
#if defined(_UDAT_H_)
#include <dat2/udat_redirection.h>
#else
#error "include <dat2/udat.h> before <dat2/dat_registry.h>"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Publish / withdraw a provider's table under the IA name in the info. */
extern DAT_RETURN DAT_API dat_registry_add_provider(
	const DAT_PROVIDER *,
	const DAT_PROVIDER_INFO *);

extern DAT_RETURN DAT_API dat_registry_remove_provider(
	const DAT_PROVIDER *,
	const DAT_PROVIDER_INFO *);

/*
 * Symbols libdat2 resolves (dlsym) in a provider library when it loads it
 * from dat.conf, and calls before first use / at unload.
 */
#define DAT_PROVIDER_INIT_FUNC_NAME dat_provider_init
#define DAT_PROVIDER_FINI_FUNC_NAME dat_provider_fini

#define DAT_PROVIDER_INIT_FUNC_STR "dat_provider_init"
#define DAT_PROVIDER_FINI_FUNC_STR "dat_provider_fini"

typedef void (DAT_API *DAT_PROVIDER_INIT_FUNC)(
	const DAT_PROVIDER_INFO *,
	const char *);			/* instance data from dat.conf */

typedef void (DAT_API *DAT_PROVIDER_FINI_FUNC)(
	const DAT_PROVIDER_INFO *);

/* Answer of dat_registry_providers_related(). */
typedef enum dat_ha_relationship {
	DAT_HA_FALSE,
	DAT_HA_TRUE,
	DAT_HA_UNKNOWN,
	DAT_HA_CONFLICTING,	/* the two providers disagree */
	DAT_HA_EXTENSION_BASE
} DAT_HA_RELATIONSHIP;

extern DAT_RETURN DAT_API dat_registry_providers_related(
	const DAT_NAME_PTR,
	const DAT_NAME_PTR,
	DAT_HA_RELATIONSHIP *);		/* out */

#ifdef __cplusplus
}
#endif

#endif /* _DAT_REGISTRY_H_ */
