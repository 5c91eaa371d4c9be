//! Laying out a kernel's code: the entry, then every `.func` it may call (directly or through
//! other functions), one after another in one instruction array with one register file of
//! per-function ranges; and decoding what only the function a statement is in can resolve:
//! `call` (its target and its `.param` arguments), branch targets (labels are scoped to their
//! `{ }` block), and `ld.param`/`st.param` of a function's own `.param` variables, which live in
//! its local frame.

use crate::decode::{
    self, Base, Build, CallTarget, FuncInfo, Instr, Kernel, ModuleSyms, Op, Opd, Placement, Scope,
    Space, Sym,
};
use crate::error::SimError;
use crate::parse::{Function, Item, Module, Stmt};
use std::collections::HashMap;

/// Deepest chain of calls a thread may make. A GPU bounds it by the per-thread stack
/// (`cudaLimitStackSize`, 1 KiB by default, whose use per frame only ptxas knows): the
/// simulator, which cannot know ptxas's frame sizes, bounds the depth instead, so runaway
/// recursion ends in a fault naming the call rather than exhausting the host.
pub const MAX_CALL_DEPTH: usize = 1024;

/// Local memory one thread may use, all frames together: 512 KiB, the CUDA limit of local
/// memory per thread (CUDA C++ Programming Guide, "Features and Technical Specifications":
/// maximum amount of local memory per thread, 512 KB, for every compute capability since 2.0).
pub const LOCAL_BYTES_LIMIT: u32 = 512 * 1024;

/// `call[.uni] (r), name, (a, b)` / `call[.uni] name, (a)` / `call name`: (return values,
/// target, arguments, anything after the argument list). Operands were split at top-level
/// commas by the parser, so a parenthesised list is one operand.
fn call_parts(s: &Stmt) -> (Vec<String>, String, Vec<String>, usize) {
    let list = |o: &str| -> Vec<String> {
        o.trim()
            .trim_start_matches('(')
            .trim_end_matches(')')
            .split(',')
            .map(|x| x.trim().to_string())
            .filter(|x| !x.is_empty())
            .collect()
    };
    let ops = &s.operands;
    let (rets, rest) = match ops.first() {
        Some(o) if o.trim_start().starts_with('(') => (list(o), &ops[1..]),
        _ => (Vec::new(), &ops[..]),
    };
    let name = rest
        .first()
        .map(|x| x.trim().to_string())
        .unwrap_or_default();
    let args = rest.get(1).map(|a| list(a)).unwrap_or_default();
    let extra = rest.len().saturating_sub(2);
    (rets, name, args, extra)
}

/// The `.func`s a function calls by name.
fn callees(f: &Function) -> Vec<String> {
    f.body
        .iter()
        .filter_map(|it| match it {
            Item::Stmt(s) if s.opcode == "call" || s.opcode.starts_with("call.") => {
                Some(call_parts(s).1)
            }
            _ => None,
        })
        .collect()
}

/// Decode entry `m.functions[entry]` and every function it reaches into one [`Kernel`].
pub(crate) fn link_kernel(m: &Module, entry: usize, syms: &ModuleSyms) -> Result<Kernel, SimError> {
    let by_name: HashMap<&str, usize> = m
        .functions
        .iter()
        .enumerate()
        .filter(|(_, f)| !f.is_entry)
        .map(|(i, f)| (f.name.as_str(), i))
        .collect();
    // The functions the entry reaches, in the order first called.
    let mut order = vec![entry];
    let mut i = 0;
    while i < order.len() {
        for name in callees(&m.functions[order[i]]) {
            if let Some(&fi) = by_name.get(name.as_str()) {
                if !order.contains(&fi) {
                    order.push(fi);
                }
            }
        }
        i += 1;
    }
    let mut table = HashMap::new();
    let mut pc = 0u32;
    let mut bases = Vec::new();
    for (k, &fi) in order.iter().enumerate() {
        let f = &m.functions[fi];
        let (rets, params, _) = decode::formals(f);
        table.insert(f.name.clone(), (k as u32, params, rets));
        bases.push(pc);
        pc += f
            .body
            .iter()
            .filter(|it| matches!(it, Item::Stmt(_)))
            .count() as u32;
    }
    let mut out = Build::default();
    let mut funcs: Vec<FuncInfo> = Vec::new();
    let mut kparams = Vec::new();
    let mut param_bytes = 0;
    for (k, &fi) in order.iter().enumerate() {
        let at = Placement {
            index: fi,
            pc_base: bases[k],
            funcs: &table,
        };
        let (info, params, pbytes) =
            decode::decode_function(&m.functions[fi], syms, &at, &mut out)?;
        if k == 0 {
            kparams = params;
            param_bytes = pbytes;
        }
        funcs.push(info);
    }
    let f = &m.functions[entry];
    Ok(Kernel {
        name: f.name.clone(),
        params: kparams,
        param_bytes,
        nregs: out.reg_names.len() as u32,
        reg_names: out.reg_names,
        code: out.code,
        local_bytes: funcs[0].frame_bytes,
        opcodes: out.opcodes,
        funcs,
    })
}

/// Decode statement `s` of function `f`: `call` and `bra` here, the rest by
/// [`decode::decode_stmt`], with a function's own `.param` variables addressed in its frame.
#[allow(clippy::too_many_arguments)]
pub(crate) fn decode_in_function(
    s: &Stmt,
    scope: &Scope,
    syms: &ModuleSyms,
    labels: &HashMap<String, u32>,
    at: &Placement<'_>,
    f: &Function,
    key: u32,
) -> Result<Instr, SimError> {
    let base = s.opcode.split('.').next().unwrap_or("");
    if base == "call" {
        return decode_call(s, scope, at, key);
    }
    if base == "bra" {
        // An undefined target is an error here, never a jump elsewhere: labels are scoped to
        // their block, so a label of another block (another copy of an inlined `asm` loop) is
        // not a target.
        if let Some(t) = s.operands.first() {
            let t = t.trim();
            if scope.reg(t).is_none() && !labels.contains_key(t) {
                return Err(SimError::Parse {
                    ptx_line: s.line,
                    detail: format!(
                        "branch target {t} is not a label of this block or an enclosing one (labels are scoped to the `{{ }}` block that declares them)"
                    ),
                });
            }
        }
    }
    let mut ins = decode::decode_stmt(s, scope, syms, labels, key)?;
    // `ld.param`/`st.param` of a `.param` variable declared in a body (a call's argument or
    // return value) or of a `.func`'s own parameters: those live in the thread's local frame.
    let frame_sym = |o: &Opd| matches!(o, Opd::Addr(Base::Sym(Sym::Local(_)), _));
    match &mut ins.op {
        Op::Ld { space, .. } if *space == Space::Param => {
            if ins.args.get(1).is_some_and(frame_sym) {
                *space = Space::Local;
            } else if !f.is_entry {
                return Err(not_a_frame_param(s));
            }
        }
        Op::St { space, .. } if *space == Space::Param => {
            if ins.args.first().is_some_and(frame_sym) {
                *space = Space::Local;
            } else if !f.is_entry {
                return Err(not_a_frame_param(s));
            }
        }
        _ => {}
    }
    let _ = at;
    Ok(ins)
}

fn not_a_frame_param(s: &Stmt) -> SimError {
    SimError::Unsupported {
        opcode: format!(
            "{} (a .param access inside a .func that names none of its .param variables)",
            s.opcode
        ),
        ptx_line: s.line,
    }
}

/// `call`: the target by name (a `.func` of the module, or the CUDA runtime's `vprintf` and
/// `__assertfail`), and each argument and return value as a `.param` variable of the caller,
/// checked against the callee's declaration (PTX ISA, "call": the argument and return lists
/// must match the callee's parameter lists).
fn decode_call(s: &Stmt, scope: &Scope, at: &Placement<'_>, key: u32) -> Result<Instr, SimError> {
    let refuse = |why: String| SimError::Unsupported {
        opcode: format!("{} ({why})", s.opcode),
        ptx_line: s.line,
    };
    let bad = |why: String| SimError::Parse {
        ptx_line: s.line,
        detail: format!("{}: {why}", s.opcode),
    };
    let mods: Vec<&str> = s.opcode.split('.').skip(1).collect();
    if mods.iter().any(|m| *m != "uni") {
        return Err(refuse("a call modifier other than .uni".into()));
    }
    let (rets, name, args, extra) = call_parts(s);
    if extra > 0 {
        return Err(refuse(
            "an indirect call through a prototype: only direct calls are modelled".into(),
        ));
    }
    if name.is_empty() {
        return Err(bad("a call without a target".into()));
    }
    if name.starts_with('%') || scope.reg(&name).is_some() {
        return Err(refuse(format!(
            "an indirect call through register {name}: only direct calls are modelled"
        )));
    }
    let var = |n: &String| -> Result<(u32, u32), SimError> {
        match scope.local(n) {
            Some((Sym::Local(o), b)) => Ok((o, b as u32)),
            _ => Err(refuse(format!(
                "argument {n} is not a .param variable of the caller (arguments in registers or immediates are not modelled)"
            ))),
        }
    };
    let rets: Vec<(u32, u32)> = rets.iter().map(var).collect::<Result<_, _>>()?;
    let args: Vec<(u32, u32)> = args.iter().map(var).collect::<Result<_, _>>()?;
    let sizes = |v: &[(u32, u32)]| v.iter().map(|x| x.1).collect::<Vec<_>>();
    let target = match at.funcs.get(&name) {
        Some((idx, params, frets)) => {
            if sizes(params) != sizes(&args) || sizes(frets) != sizes(&rets) {
                return Err(bad(format!(
                    "the call passes arguments of {:?} bytes and return values of {:?} bytes; {name} declares {:?} and {:?}",
                    sizes(&args),
                    sizes(&rets),
                    sizes(params),
                    sizes(frets)
                )));
            }
            CallTarget::Func(*idx)
        }
        None => match name.as_str() {
            // int vprintf(const char* format, void* args)
            "vprintf" => {
                if sizes(&args) != [8, 8] || rets.len() > 1 || rets.iter().any(|r| r.1 != 4) {
                    return Err(bad("vprintf takes two 64-bit arguments and returns a 32-bit int".into()));
                }
                CallTarget::Vprintf
            }
            // void __assertfail(const char* message, const char* file, unsigned line,
            //                   const char* function, size_t char_size)
            "__assertfail" => {
                if sizes(&args) != [8, 8, 4, 8, 8] || !rets.is_empty() {
                    return Err(bad("__assertfail takes (message, file, line, function, char size)".into()));
                }
                CallTarget::AssertFail
            }
            _ => {
                return Err(refuse(format!(
                    "a call of {name}, which has no body in this module (of the CUDA runtime's device functions only vprintf and __assertfail are modelled)"
                )))
            }
        },
    };
    Ok(Instr {
        op: Op::Call { target, rets, args },
        guard: match &s.guard {
            Some((p, neg)) => Some((
                scope.reg(p).ok_or_else(|| SimError::Parse {
                    ptx_line: s.line,
                    detail: format!("guard `{p}` is not a declared predicate"),
                })?,
                *neg,
            )),
            None => None,
        },
        args: Vec::new(),
        ptx_line: s.line,
        loc: s.loc,
        key,
    })
}
