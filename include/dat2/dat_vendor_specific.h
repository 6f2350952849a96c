/* DAT 2.0 vendor hook — written for this project; ABI-compatible with DAT 2.0 */

#ifndef _DAT_VENDOR_SPECIFIC_H_
#define _DAT_VENDOR_SPECIFIC_H_

/*
 * Reserved for vendor-private additions to the common DAT API. No vendor
 * defines anything here; the file exists so that code including it by name
 * keeps building.
 */

#endif /* _DAT_VENDOR_SPECIFIC_H_ */
