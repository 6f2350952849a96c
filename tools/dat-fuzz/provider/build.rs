// dat.conf names the provider by soname, like every other provider.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libdaplmock.so.2");
}
