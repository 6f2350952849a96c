//! Small helpers the core and its backends share.

use std::ffi::CString;

/// A C string of `s`, with any NUL bytes in it dropped.
pub fn cstring(s: &str) -> CString {
    CString::new(s.replace('\0', "")).unwrap_or_default()
}

/// The length of a sockaddr of this family, for the families DAT addresses use.
pub fn sockaddr_len(family: libc::sa_family_t) -> Option<usize> {
    match family as i32 {
        libc::AF_INET => Some(std::mem::size_of::<libc::sockaddr_in>()),
        libc::AF_INET6 => Some(std::mem::size_of::<libc::sockaddr_in6>()),
        _ => None,
    }
}

/// A list of up to `N` items on the stack, moved to the heap past `N`: the
/// lists a wait makes each time (a CNO's EVDs, the fds it sleeps on), which
/// for the usual sizes then cost no allocation.
pub enum Inline<T: Copy, const N: usize> {
    Stack(usize, [T; N]),
    Heap(Vec<T>),
}

impl<T: Copy, const N: usize> Inline<T, N> {
    /// Empty; `blank` fills the unused slots.
    pub fn new(blank: T) -> Self {
        Inline::Stack(0, [blank; N])
    }

    pub fn from_slice(items: &[T], blank: T) -> Self {
        if items.len() > N {
            return Inline::Heap(items.to_vec());
        }
        let mut a = [blank; N];
        a[..items.len()].copy_from_slice(items);
        Inline::Stack(items.len(), a)
    }

    pub fn push(&mut self, item: T) {
        match self {
            Inline::Stack(n, a) if *n < N => {
                a[*n] = item;
                *n += 1;
            }
            Inline::Stack(n, a) => {
                let mut v = a[..*n].to_vec();
                v.push(item);
                *self = Inline::Heap(v);
            }
            Inline::Heap(v) => v.push(item),
        }
    }
}

impl<T: Copy, const N: usize> AsRef<[T]> for Inline<T, N> {
    fn as_ref(&self) -> &[T] {
        match self {
            Inline::Stack(n, a) => &a[..*n],
            Inline::Heap(v) => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Inline;

    #[test]
    fn an_inline_list_keeps_its_items_in_order_on_the_stack_and_past_it() {
        let mut l: Inline<u32, 2> = Inline::new(0);
        assert!(l.as_ref().is_empty());
        l.push(7);
        l.push(8);
        assert!(matches!(l, Inline::Stack(2, _)));
        l.push(9);
        assert!(matches!(l, Inline::Heap(_)));
        assert_eq!(l.as_ref(), &[7, 8, 9]);
        assert_eq!(Inline::<u32, 2>::from_slice(&[1, 2], 0).as_ref(), &[1, 2]);
        assert!(matches!(Inline::<u32, 2>::from_slice(&[1, 2, 3], 0), Inline::Heap(_)));
        assert_eq!(Inline::<u32, 2>::from_slice(&[1, 2, 3], 0).as_ref(), &[1, 2, 3]);
    }
}
