//! The IA names this library was registered under, with their ia_params.

use std::collections::HashMap;
use std::sync::Mutex;

static INSTANCES: Mutex<Option<HashMap<String, String>>> = Mutex::new(None);

pub fn add(name: &str, params: &str) {
    INSTANCES.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::new)
        .insert(name.to_owned(), params.to_owned());
}

pub fn remove(name: &str) {
    if let Some(map) = INSTANCES.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        map.remove(name);
    }
}

pub fn params(name: &str) -> Option<String> {
    INSTANCES.lock().unwrap_or_else(|e| e.into_inner()).as_ref()?.get(name).cloned()
}
