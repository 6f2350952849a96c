/* dat_extension_op is variadic, which stable Rust cannot define. This shim
 * only captures the va_list and hands it to the Rust side, which validates
 * the handle and forwards it to the provider's handle_extendedop_func. */
#include <stdarg.h>
#include <dat2/udat.h>

DAT_RETURN dat_registry_forward_extension(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args);

DAT_RETURN DAT_API dat_extension_op(DAT_HANDLE handle, DAT_EXTENDED_OP op, ...)
{
	va_list args;
	DAT_RETURN ret;

	va_start(args, op);
	ret = dat_registry_forward_extension(handle, op, args);
	va_end(args);
	return ret;
}
