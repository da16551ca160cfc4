# The install and update hook of `helm khook` on Windows (plugin.yaml runs
# it with powershell -File). The same as install-plugin.sh: it puts
# helm-khook.exe for this CPU at $env:HELM_PLUGIN_DIR\bin\helm-khook.exe,
# keeping a binary already there (from `make build` or the release archive)
# and otherwise downloading the release archive named by plugin.yaml's
# version from $env:KHOOK_RELEASE_URL/v<version>/, checked against that
# release's checksums.txt. KHOOK_FORCE_DOWNLOAD=1 replaces any binary.
# Runs on Windows PowerShell 5.1 and PowerShell 7. See docs/plugins.md.
$ErrorActionPreference = 'Stop'
$ProgressPreference = 'SilentlyContinue'

# Where releases are published: <base>/v<version>/<archive>. hack/dist.mk's
# RELEASE_URL has the same default (a test checks that they agree).
$releaseUrl = 'https://github.com/khook-io/khook/releases/download'
if ($env:KHOOK_RELEASE_URL) { $releaseUrl = $env:KHOOK_RELEASE_URL }

function Fail([string]$msg) {
    [Console]::Error.WriteLine("helm khook: $msg")
    exit 1
}

$dir = $env:HELM_PLUGIN_DIR
if (-not $dir) { $dir = Split-Path -Parent $PSScriptRoot }
$binDir = Join-Path $dir 'bin'
$bin = Join-Path $binDir 'helm-khook.exe'
$marker = Join-Path $binDir '.downloaded-version'

$line = Select-String -Path (Join-Path $dir 'plugin.yaml') -Pattern '^version:\s*"?([^"\s]+)"?\s*$' | Select-Object -First 1
if (-not $line) { Fail "no version: line in $dir\plugin.yaml" }
$version = $line.Matches[0].Groups[1].Value

if ((Test-Path $bin) -and ($env:KHOOK_FORCE_DOWNLOAD -ne '1')) {
    if (-not (Test-Path $marker)) {
        Write-Output "helm khook: using $bin (not downloaded)"
        exit 0
    }
    if ((Get-Content $marker -Raw).Trim() -eq "v$version") {
        Write-Output "helm khook: using $bin (v$version)"
        exit 0
    }
}

$cpu = $env:PROCESSOR_ARCHITEW6432
if (-not $cpu) { $cpu = $env:PROCESSOR_ARCHITECTURE }
switch ($cpu) {
    'AMD64' { $arch = 'amd64' }
    'ARM64' { $arch = 'arm64' }
    default { Fail "unsupported CPU $($cpu): khook ships amd64 and arm64" }
}

$archive = "helm-khook_v$($version)_windows_$arch.zip"
$base = $releaseUrl.TrimEnd('/') + "/v$version"
$tmp = Join-Path ([IO.Path]::GetTempPath()) ("khook-" + [Guid]::NewGuid())
New-Item -ItemType Directory -Path $tmp | Out-Null
try {
    [Net.ServicePointManager]::SecurityProtocol = [Net.ServicePointManager]::SecurityProtocol -bor [Net.SecurityProtocolType]::Tls12
    Write-Output "helm khook: downloading $base/$archive"
    try {
        Invoke-WebRequest -UseBasicParsing -Uri "$base/$archive" -OutFile (Join-Path $tmp $archive)
        Invoke-WebRequest -UseBasicParsing -Uri "$base/checksums.txt" -OutFile (Join-Path $tmp 'checksums.txt')
    } catch {
        Fail "download from $base failed (offline? build it: make build, then install from the working tree; or set KHOOK_RELEASE_URL): $_"
    }
    $want = $null
    foreach ($l in Get-Content (Join-Path $tmp 'checksums.txt')) {
        $f = $l -split '\s+', 2
        if ($f.Count -eq 2 -and $f[1].TrimStart('*') -eq $archive) { $want = $f[0].ToLower() }
    }
    if (-not $want) { Fail "$archive is not in $base/checksums.txt" }
    $got = (Get-FileHash -Algorithm SHA256 -Path (Join-Path $tmp $archive)).Hash.ToLower()
    if ($got -ne $want) { Fail "$($archive): sha256 $got, checksums.txt says $want" }

    Expand-Archive -Path (Join-Path $tmp $archive) -DestinationPath (Join-Path $tmp 'x') -Force
    $new = Join-Path $tmp 'x\bin\helm-khook.exe'
    if (-not (Test-Path $new)) { Fail "$archive has no bin\helm-khook.exe" }
    New-Item -ItemType Directory -Force -Path $binDir | Out-Null
    Copy-Item -Force $new $bin
    Set-Content -Path $marker -Value "v$version"
    Write-Output "helm khook: installed $bin (v$version, windows/$arch)"
} finally {
    Remove-Item -Recurse -Force $tmp -ErrorAction SilentlyContinue
}
