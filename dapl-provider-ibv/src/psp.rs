//! Public service points: listen on a connection qualifier, turn each
//! incoming request into a CR on the PSP's EVD.

use crate::evd;
use crate::handle::{self, Object, Pool};
use crate::ia::Ia;
use crate::verbs::cm;
use dat_abi::status::{error, guard, invalid_arg, no_resources};
use dat_abi::*;
use rdma_core_sys as ibv;
use std::sync::atomic::{AtomicPtr, Ordering};

pub struct Psp {
    pub ia: &'static Ia,
    pub ia_handle: usize,
    pub conn_qual: DAT_CONN_QUAL,
    pub evd: usize,
    pub flags: DAT_PSP_FLAGS,
    id: AtomicPtr<ibv::rdma_cm_id>,
    /// The same port in rdma_cm's UDP space, where UD EPs resolve us.
    ud_id: AtomicPtr<ibv::rdma_cm_id>,
}

pub const RANK: u8 = 10;

static POOL: Pool<Psp> = Pool::new();

impl Object for Psp {
    const TYPE: DAT_HANDLE_TYPE = DAT_HANDLE_TYPE_PSP;
    const INVALID: u32 = DAT_INVALID_HANDLE_PSP;
}

/// The rdma_cm port for a connection qualifier, mapped as DAPL's rdma_cm
/// provider maps it, so the two listen and connect on the same port: a
/// qualifier that fits in 16 bits is the port; a larger one is folded into
/// the range 33534..=65534.
pub fn port_of(qual: DAT_CONN_QUAL) -> u16 {
    if qual > 0xffff { ((qual % 32001) + 33534) as u16 } else { qual as u16 }
}

/// An rdma_cm id bound to the IA address on `port` (0: any) and listening,
/// with `context` as its owner. Returns the id and the port it got.
pub fn listen(ia: &Ia, port: u16, context: usize) -> Result<(*mut ibv::rdma_cm_id, u16), DAT_RETURN> {
    listen_in(ia, port, context, ibv::RDMA_PS_TCP)
}

fn listen_in(ia: &Ia, port: u16, context: usize, ps: u32) -> Result<(*mut ibv::rdma_cm_id, u16), DAT_RETURN> {
    let id = cm::create_id_in(ia.device.channel, context, ps).map_err(|e| {
        log::warn!("rdma_create_id: {e}");
        no_resources(DAT_RESOURCE_TEP)
    })?;
    let mut addr = *ia.device.addr;
    // SAFETY: sin_port and sin6_port sit at the same offset in both families.
    unsafe { (*(&mut addr as *mut _ as *mut libc::sockaddr_in)).sin_port = port.to_be() };
    // SAFETY: live id; addr is a valid sockaddr of the IA's family.
    let bound = unsafe { ibv::rdma_bind_addr(id, &mut addr as *mut _ as *mut libc::sockaddr) } == 0;
    // SAFETY: bound id.
    if !bound || unsafe { ibv::rdma_listen(id, 128) } != 0 {
        let e = std::io::Error::last_os_error();
        cm::destroy_id(id);
        return Err(if e.raw_os_error() == Some(libc::EADDRINUSE) {
            error(DAT_CONN_QUAL_IN_USE, 0)
        } else {
            log::warn!("listening on port {port}: {e}");
            no_resources(DAT_RESOURCE_TEP)
        });
    }
    // SAFETY: bound id.
    let got = u16::from_be(unsafe { ibv::rdma_get_src_port(id) });
    Ok((id, got))
}

fn create_psp(ia_h: DAT_IA_HANDLE, qual: Option<DAT_CONN_QUAL>, evd_h: DAT_EVD_HANDLE, flags: DAT_PSP_FLAGS)
    -> Result<(DAT_PSP_HANDLE, DAT_CONN_QUAL), DAT_RETURN>
{
    let ia = handle::get::<Ia>(ia_h)?;
    let evd = evd::require(evd_h, DAT_EVD_CR_FLAG, DAT_INVALID_HANDLE_EVD_CR)?;
    if !std::ptr::eq(evd.ia, ia) {
        // Another IA's EVD: its CM thread and device are not this IA's.
        return Err(dat_abi::status::invalid_handle(DAT_INVALID_HANDLE_EVD_CR));
    }
    if flags != DAT_PSP_CONSUMER_FLAG && flags != DAT_PSP_PROVIDER_FLAG {
        return Err(invalid_arg(DAT_INVALID_ARG4));
    }
    let (id, port) = listen(ia, qual.map_or(0, port_of), 0)?;
    log::debug!("PSP listening on port {port} for conn_qual {qual:?}");
    let conn_qual = qual.unwrap_or(port as DAT_CONN_QUAL);
    // UD requests come through the UDP space; a PSP without one still serves RC.
    let ud_id = listen_in(ia, port, 0, ibv::RDMA_PS_UDP).map(|(id, _)| id).unwrap_or_else(|e| {
        log::debug!("PSP on port {port}: no UD listener ({e:#x})");
        std::ptr::null_mut()
    });
    let h = POOL.insert(
        Psp { ia, ia_handle: ia_h as usize, conn_qual, evd: evd_h as usize, flags, id: AtomicPtr::new(id), ud_id: AtomicPtr::new(ud_id) },
        ia.table(),
    );
    // SAFETY: the ids are ours; events on them now name this PSP.
    unsafe {
        (*id).context = h;
        if !ud_id.is_null() {
            (*ud_id).context = h;
        }
    }
    evd.users.fetch_add(1, Ordering::AcqRel);
    ia.adopt(h, RANK, destroy);
    Ok((h, conn_qual))
}

pub unsafe extern "C" fn create(
    ia_h: DAT_IA_HANDLE,
    qual: DAT_CONN_QUAL,
    evd_h: DAT_EVD_HANDLE,
    flags: DAT_PSP_FLAGS,
    out: *mut DAT_PSP_HANDLE,
) -> DAT_RETURN {
    guard("dat_psp_create", || {
        if out.is_null() {
            return invalid_arg(DAT_INVALID_ARG5);
        }
        match create_psp(ia_h, Some(qual), evd_h, flags) {
            Ok((h, _)) => {
                // SAFETY: checked non-null.
                unsafe { *out = h };
                DAT_SUCCESS
            }
            Err(e) => e,
        }
    })
}

pub unsafe extern "C" fn create_any(
    ia_h: DAT_IA_HANDLE,
    qual: *mut DAT_CONN_QUAL,
    evd_h: DAT_EVD_HANDLE,
    flags: DAT_PSP_FLAGS,
    out: *mut DAT_PSP_HANDLE,
) -> DAT_RETURN {
    guard("dat_psp_create_any", || {
        if qual.is_null() {
            return invalid_arg(DAT_INVALID_ARG2);
        }
        if out.is_null() {
            return invalid_arg(DAT_INVALID_ARG5);
        }
        match create_psp(ia_h, None, evd_h, flags) {
            Ok((h, q)) => {
                // SAFETY: both checked non-null.
                unsafe {
                    *out = h;
                    *qual = q;
                }
                DAT_SUCCESS
            }
            Err(e) => e,
        }
    })
}

fn destroy(h: DAT_HANDLE) {
    let Ok(psp) = handle::get::<Psp>(h) else { return };
    psp.ia.disown(h);
    let id = psp.id.swap(std::ptr::null_mut(), Ordering::AcqRel);
    let ud_id = psp.ud_id.swap(std::ptr::null_mut(), Ordering::AcqRel);
    let evd = psp.evd;
    if crate::connection::quiesced(|| POOL.remove(h)) {
        cm::destroy_id(id);
        cm::destroy_id(ud_id);
        if let Ok(e) = handle::get::<evd::Evd>(evd as DAT_HANDLE) {
            e.users.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

pub unsafe extern "C" fn free(h: DAT_PSP_HANDLE) -> DAT_RETURN {
    guard("dat_psp_free", || match handle::get::<Psp>(h) {
        Ok(_) => {
            destroy(h);
            DAT_SUCCESS
        }
        Err(e) => e,
    })
}

pub unsafe extern "C" fn query(h: DAT_PSP_HANDLE, _mask: DAT_PSP_PARAM_MASK, out: *mut DAT_PSP_PARAM) -> DAT_RETURN {
    guard("dat_psp_query", || {
        let psp = match handle::get::<Psp>(h) {
            Ok(p) => p,
            Err(e) => return e,
        };
        // SAFETY: null-checked consumer out-parameter.
        let Some(p) = (unsafe { out.as_mut() }) else { return invalid_arg(DAT_INVALID_ARG3) };
        p.ia_handle = psp.ia_handle as DAT_IA_HANDLE;
        p.conn_qual = psp.conn_qual;
        p.evd_handle = psp.evd as DAT_EVD_HANDLE;
        p.psp_flags = psp.flags;
        DAT_SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::port_of;

    #[test]
    fn qualifiers_map_to_ports_like_dapl() {
        assert_eq!(port_of(45248), 45248);
        assert_eq!(port_of(0xffff), 0xffff);
        assert_eq!(port_of(0x12345), ((0x12345u64 % 32001) + 33534) as u16);
        assert_eq!(port_of(0x12345), 44097);
        assert!(port_of(u64::MAX) >= 33534);
    }
}
