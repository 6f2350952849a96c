/* udat_vendor_specific.h — written for this project; ABI-compatible with DAT 2.0 */
#ifndef _UDAT_VENDOR_SPECIFIC_H_
#define _UDAT_VENDOR_SPECIFIC_H_

#include <dat2/dat_vendor_specific.h>

/*
 * Hook for user-space-only vendor additions.  No vendor defines anything
 * here, so the file only chains to the common vendor header.
 */

#endif /* _UDAT_VENDOR_SPECIFIC_H_ */
