/* udat_config.h — written for this project; ABI-compatible with DAT 2.0 */
#ifndef _UDAT_CONFIG_H_
#define _UDAT_CONFIG_H_

#define DAT_VERSION_MAJOR 2
#define DAT_VERSION_MINOR 0

/*
 * Deliberately unconditional: the stock header forces DAT_FALSE no matter
 * what the build passes in, and dat_ia_open() hands this value to the
 * registry, so a different default would change runtime behaviour.
 */
#define DAT_THREADSAFE DAT_FALSE

/* Extensions are on unless the consumer already chose otherwise. */
#ifndef DAT_EXTENSIONS
#define DAT_EXTENSIONS 1
#endif

#endif /* _UDAT_CONFIG_H_ */
