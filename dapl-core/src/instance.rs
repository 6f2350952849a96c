//! The IA names this library was registered under, with their ia_params.

use crate::state::Provider;
use std::collections::HashMap;

pub fn add<T: Provider>(name: &str, params: &str) {
    T::state().instances.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::new)
        .insert(name.to_owned(), params.to_owned());
}

pub fn remove<T: Provider>(name: &str) {
    if let Some(map) = T::state().instances.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        map.remove(name);
    }
}

pub fn params<T: Provider>(name: &str) -> Option<String> {
    T::state().instances.lock().unwrap_or_else(|e| e.into_inner()).as_ref()?.get(name).cloned()
}
