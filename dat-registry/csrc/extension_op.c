/* dat_extension_op is variadic, which stable Rust cannot define. This shim
 * only captures the va_list and hands it to the Rust side, which validates
 * the handle and forwards it to the provider's handle_extendedop_func.
 * The open/close query pair is the registry's own: an open query has no
 * handle yet, only the IA name, so its arguments are unpacked here. */
#include <stdarg.h>
#include <dat2/udat.h>

DAT_RETURN dat_registry_forward_extension(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args);
DAT_RETURN dat_registry_open_query(const char *name, DAT_IA_HANDLE *ia, DAT_IA_ATTR_MASK ia_mask,
				   DAT_IA_ATTR *ia_attr, DAT_PROVIDER_ATTR_MASK pr_mask,
				   DAT_PROVIDER_ATTR *pr_attr);
DAT_RETURN dat_registry_close_query(DAT_HANDLE ia);

DAT_RETURN DAT_API dat_extension_op(DAT_HANDLE handle, DAT_EXTENDED_OP op, ...)
{
	va_list args;
	DAT_RETURN ret;

	va_start(args, op);
	if ((int)op == DAT_OPEN_EXTENSION_BASE) {
		const char *name = va_arg(args, const char *);
		DAT_IA_HANDLE *ia = va_arg(args, DAT_IA_HANDLE *);
		DAT_IA_ATTR_MASK ia_mask = va_arg(args, DAT_IA_ATTR_MASK);
		DAT_IA_ATTR *ia_attr = va_arg(args, DAT_IA_ATTR *);
		DAT_PROVIDER_ATTR_MASK pr_mask = va_arg(args, DAT_PROVIDER_ATTR_MASK);
		DAT_PROVIDER_ATTR *pr_attr = va_arg(args, DAT_PROVIDER_ATTR *);

		ret = dat_registry_open_query(name, ia, ia_mask, ia_attr, pr_mask, pr_attr);
	} else if ((int)op == DAT_CLOSE_EXTENSION_BASE) {
		ret = dat_registry_close_query(handle);
	} else {
		ret = dat_registry_forward_extension(handle, op, args);
	}
	va_end(args);
	return ret;
}
