# Finds the CANN toolkit and NNAL's ATB on an Ascend host, under every layout CANN documents,
# and sources their set_env.sh scripts. Sourced, never run:
#
#   source ci/atlas/ascend-env.sh       # the pipelines: GitHub's BASH_ENV, GitLab's before_script
#
# Then CONFORM_CANN_SET_ENV, CONFORM_CANN_RELEASE (the release of the compatibility table, e.g.
# 8.0.RC2) and CONFORM_CANN_BUILD (what the toolkit says, e.g. 8.0.RC2.alpha001) are exported
# when a toolkit was found, and CONFORM_ATB_SET_ENV / CONFORM_ATB_VERSION when NNAL's ATB was.
# What is missing is said on stderr; the shell's options (-e, -u) are left as they were.
# With ASCEND_ENV_FUNCTIONS_ONLY=1 only the functions are defined (ci/atlas/setup-torch-npu.sh).
#
# Where CANN lives (the first root that holds a set_env.sh, itself or one level up, wins):
#   $CANN_SET_ENV's directory (and its latest/), if set
#   $ASCEND_HOME_PATH, $ASCEND_TOOLKIT_HOME (set by an earlier set_env.sh)
#   <base>/cann            CANN 8.5 and later (a link to <base>/cann-<release>); set_env.sh in it
#   <base>/ascend-toolkit/latest    CANN 8.3 and earlier; set_env.sh in <base>/ascend-toolkit
#   <base>/cann-<release>, <base>/ascend-toolkit/<release>   newest first, when no link exists
# for each <base> of $ASCEND_BASES (colon-separated), default /usr/local/Ascend (root installs)
# then $HOME/Ascend (non-root installs).
# NNAL's ATB: <base>/nnal/atb/set_env.sh (and the tree above $ATB_HOME_PATH, if set); its
# version from nnal/atb/latest/version.info ("Ascend-cann-atb : 8.2.RC2"). Sourcing it puts
# libatb.so on LD_LIBRARY_PATH, which torch_npu's ATB operators (_npu_reshape_and_cache among
# them) load; it picks the C++ ABI from `python3 -c "import torch"` unless told
# (--cxx_abi=0|1): CONFORM_ATB_CXX_ABI, written by setup-torch-npu.sh from the worker's torch,
# is passed when set.

ascend_bases() {
    local IFS=:
    if [ -n "${ASCEND_BASES:-}" ]; then
        printf '%s\n' $ASCEND_BASES
    else
        echo /usr/local/Ascend
        [ -n "${HOME:-}" ] && echo "$HOME/Ascend"
    fi
    return 0
}

# Directories under $1 matching $2 (a glob), newest release first.
ascend_versioned_dirs() {
    local d
    for d in "$1"/$2; do
        [ -d "$d" ] && echo "$d"
    done | sort -rV
}

# Candidate toolkit roots, in the order above, one a line.
ascend_cann_roots() {
    local base
    [ -n "${CANN_SET_ENV:-}" ] && dirname "$CANN_SET_ENV"
    [ -n "${ASCEND_HOME_PATH:-}" ] && echo "$ASCEND_HOME_PATH"
    [ -n "${ASCEND_TOOLKIT_HOME:-}" ] && echo "$ASCEND_TOOLKIT_HOME"
    while IFS= read -r base; do
        echo "$base/cann"
        echo "$base/ascend-toolkit/latest"
        ascend_versioned_dirs "$base" 'cann-*'
        ascend_versioned_dirs "$base/ascend-toolkit" '[0-9]*'
    done < <(ascend_bases)
    return 0
}

# The set_env.sh of a toolkit root (in it on CANN 8.5 and later, one level up before), or
# nothing.
ascend_set_env_of() {
    if [ -f "$1/set_env.sh" ]; then
        echo "$1/set_env.sh"
    elif [ -f "$1/../set_env.sh" ]; then
        (cd "$1/.." && echo "$PWD/set_env.sh")
    else
        return 1
    fi
}

# A CANN release or build as the compatibility table and the toolkit write them: 8.0.0,
# 8.1.RC1, 8.5.0.alpha002, 8.0.RC3.beta1, 9.2.0-beta.2; never a component version (four or
# more numeric parts) or an internal build (8.0.T63).
ascend_is_release() {
    [[ "$1" =~ ^[0-9]+\.[0-9]+\.(RC[0-9]+|[0-9]+)([.-][A-Za-z][0-9A-Za-z.]*)?$ ]]
}

# The release a build belongs to: 8.5.0.alpha001 -> 8.5.0, 8.0.RC2.alpha001 -> 8.0.RC2,
# 8.0.RC3.beta1 -> 8.0.RC3 (the community edition of the 8.0.RC3 release), 9.2.0-beta.2 ->
# 9.2.0. A release is its own.
ascend_release_of() {
    [[ "$1" =~ ^([0-9]+\.[0-9]+\.(RC[0-9]+|[0-9]+))([.-].*)?$ ]] && echo "${BASH_REMATCH[1]}"
}

# The first `key=value` value in a file (whitespace around both trimmed, quotes dropped).
ascend_kv() {
    sed -n "s/^[[:space:]]*$2[[:space:]]*=[[:space:]]*\"\{0,1\}\([^\"[:space:]]*\)\"\{0,1\}[[:space:]]*\$/\1/p" "$1" | head -n 1
}

# Prints "<build> <file>" for the first file under the roots (arguments) that names a CANN
# release or build, read from, in order:
#   <arch>-linux/ascend_toolkit_install.info   version=8.0.0 (also 8.3.RC2, 9.2.0-beta.2)
#   version.cfg                                runtime_running_version=[7.6.0.1.220:8.0.0]:
#                                              the part AFTER the colon is the CANN release;
#                                              before it is a component version
#   <component>/version.info                   version_dir=8.0.0 is the release; Version= is
#                                              a component version on CANN 8.x (7.6.0.1.220
#                                              on 8.0.0, 8.2.0.0.201 on 8.2.RC1), used only
#                                              when version_dir is not a release (CANN 9:
#                                              Version=9.2.0-beta.2, version_dir=cann)
ascend_detect_cann_build() {
    local root f v arch
    arch="$(uname -m)"
    for root in "$@"; do
        [ -n "$root" ] && [ -d "$root" ] || continue
        for f in "$root/$arch-linux/ascend_toolkit_install.info" \
                 "$root"/*-linux/ascend_toolkit_install.info \
                 "$root/share/info/ascend_toolkit_install.info"; do
            [ -f "$f" ] || continue
            v="$(ascend_kv "$f" version)"
            if ascend_is_release "$v"; then echo "$v $f"; return 0; fi
        done
        f="$root/version.cfg"
        if [ -f "$f" ]; then
            v="$(sed -n 's/^[[:space:]]*runtime_running_version=\[[^]:]*:\([^]]*\)\].*/\1/p' "$f" | head -n 1)"
            v="${v#CANN-}"
            if ascend_is_release "$v"; then echo "$v $f"; return 0; fi
        fi
        for f in "$root/version.info" "$root/runtime/version.info" "$root/compiler/version.info" \
                 "$root/toolkit/version.info" "$root/opp/version.info"; do
            [ -f "$f" ] || continue
            v="$(ascend_kv "$f" version_dir)"
            if ascend_is_release "$v"; then echo "$v $f"; return 0; fi
            v="$(ascend_kv "$f" Version)"
            if ascend_is_release "$v"; then echo "$v $f"; return 0; fi
        done
    done
    return 1
}

# Finds the toolkit: sets ASCEND_CANN_ROOT and ASCEND_CANN_SET_ENV ($CANN_SET_ENV when set,
# else the first candidate root with a set_env.sh), and, when its version files name one,
# ASCEND_CANN_BUILD, ASCEND_CANN_RELEASE and ASCEND_CANN_VERSION_FILE. Returns 1 when no
# toolkit is found (or $CANN_SET_ENV names no file).
ascend_find_cann() {
    local root set_env
    ASCEND_CANN_ROOT="" ASCEND_CANN_SET_ENV="" ASCEND_CANN_BUILD="" ASCEND_CANN_RELEASE=""
    ASCEND_CANN_VERSION_FILE=""
    if [ -n "${CANN_SET_ENV:-}" ]; then
        # Told where set_env.sh is: it is the one, its directory (or latest/ in it) the root.
        [ -f "$CANN_SET_ENV" ] || return 1
        root="$(dirname "$CANN_SET_ENV")"
        [ -d "$root/latest" ] && root="$root/latest"
        ascend_take_cann_root "$root" "$CANN_SET_ENV"
        return 0
    fi
    while IFS= read -r root; do
        [ -n "$root" ] && [ -d "$root" ] || continue
        set_env="$(ascend_set_env_of "$root")" || continue
        ascend_take_cann_root "$root" "$set_env"
        return 0
    done < <(ascend_cann_roots)
    return 1
}

# Records toolkit root $1 with its set_env.sh $2, and the release its version files name.
ascend_take_cann_root() {
    local found
    ASCEND_CANN_ROOT="$(cd "$1" && pwd)"
    ASCEND_CANN_SET_ENV="$2"
    if found="$(ascend_detect_cann_build "$ASCEND_CANN_ROOT")"; then
        ASCEND_CANN_BUILD="${found%% *}"
        ASCEND_CANN_VERSION_FILE="${found#* }"
        ASCEND_CANN_RELEASE="$(ascend_release_of "$ASCEND_CANN_BUILD")"
    fi
}

# Candidate NNAL ATB directories (each holding set_env.sh), one a line.
ascend_atb_roots() {
    local base
    # ATB_HOME_PATH is <nnal>/atb/<version or latest>/atb/cxx_abi_<n>.
    [ -n "${ATB_HOME_PATH:-}" ] && echo "$ATB_HOME_PATH/../../.."
    while IFS= read -r base; do
        echo "$base/nnal/atb"
    done < <(ascend_bases)
    return 0
}

# The ATB version an NNAL directory holds: latest/version.info's "Ascend-cann-atb : <v>" (or
# a version= line), else the release directory `latest` points to.
ascend_atb_version_of() {
    local info="$1/latest/version.info" v
    if [ -f "$info" ]; then
        v="$(sed -n 's/^[[:space:]]*Ascend-cann-atb[[:space:]]*:[[:space:]]*\([^[:space:]]*\).*/\1/p' "$info" | head -n 1)"
        [ -n "$v" ] || v="$(ascend_kv "$info" version)"
        [ -n "$v" ] && { echo "$v"; return 0; }
    fi
    if [ -d "$1/latest" ]; then
        v="$(basename "$(cd "$1/latest" && pwd -P)")"
        ascend_is_release "$v" && { echo "$v"; return 0; }
    fi
    echo unknown
}

# Finds NNAL's ATB: sets ASCEND_ATB_SET_ENV and ASCEND_ATB_VERSION, or returns 1.
ascend_find_atb() {
    local dir
    ASCEND_ATB_SET_ENV="" ASCEND_ATB_VERSION=""
    while IFS= read -r dir; do
        [ -f "$dir/set_env.sh" ] || continue
        dir="$(cd "$dir" && pwd)"
        ASCEND_ATB_SET_ENV="$dir/set_env.sh"
        ASCEND_ATB_VERSION="$(ascend_atb_version_of "$dir")"
        return 0
    done < <(ascend_atb_roots)
    return 1
}

# Sources a vendor script with -e and -u off (they reference unset variables and return
# non-zero from inner tests), then puts the caller's options back.
ascend_source() {
    local opts="$-" file="$1"
    shift
    set +eu
    # shellcheck disable=SC1090
    source "$file" "$@"
    case "$opts" in *e*) set -e ;; esac
    case "$opts" in *u*) set -u ;; esac
    return 0
}

# Sources CANN's and ATB's set_env.sh, exporting what was found (see the top of the file).
# A shell started from one that did this already (BASH_ENV reaches every nested bash) has the
# variables: it sources nothing again unless what it would source differs, and what is missing
# is said once.
ascend_env_source() {
    local cann_found=0 atb_found=0 key
    ascend_find_cann && cann_found=1
    ascend_find_atb && atb_found=1
    key="$ASCEND_CANN_SET_ENV|$ASCEND_ATB_SET_ENV|${CONFORM_ATB_CXX_ABI:-}"
    [ "${CONFORM_ASCEND_ENV:-}" = "$key" ] && return 0
    export CONFORM_ASCEND_ENV="$key"
    if [ "$cann_found" = 1 ]; then
        ascend_source "$ASCEND_CANN_SET_ENV"
        export CONFORM_CANN_SET_ENV="$ASCEND_CANN_SET_ENV"
        export CONFORM_CANN_RELEASE="$ASCEND_CANN_RELEASE" CONFORM_CANN_BUILD="$ASCEND_CANN_BUILD"
    else
        echo "ascend-env: no CANN toolkit (set_env.sh) under: $(ascend_cann_roots | tr '\n' ' ')" >&2
    fi
    if [ "$atb_found" = 1 ]; then
        if [ -n "${CONFORM_ATB_CXX_ABI:-}" ]; then
            ascend_source "$ASCEND_ATB_SET_ENV" "--cxx_abi=$CONFORM_ATB_CXX_ABI"
        else
            ascend_source "$ASCEND_ATB_SET_ENV"
        fi
        export CONFORM_ATB_SET_ENV="$ASCEND_ATB_SET_ENV" CONFORM_ATB_VERSION="$ASCEND_ATB_VERSION"
    else
        echo "ascend-env: no NNAL ATB (nnal/atb/set_env.sh) under: $(ascend_atb_roots | tr '\n' ' ')" >&2
    fi
    return 0
}

if [ "${ASCEND_ENV_FUNCTIONS_ONLY:-0}" != 1 ]; then
    ascend_env_source
fi
