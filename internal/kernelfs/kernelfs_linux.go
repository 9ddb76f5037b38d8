package kernelfs

import "golang.org/x/sys/unix"

// names are the file systems no one can write a file of one's own on, by
// their statfs(2) magic.
var names = map[int64]string{
	unix.SYSFS_MAGIC:      "sysfs",
	unix.PROC_SUPER_MAGIC: "procfs",
	unix.DEBUGFS_MAGIC:    "debugfs",
	unix.SECURITYFS_MAGIC: "securityfs",
}

// fsName is the name of the kernel's file system p is on, "" for
// another, or statfs(2)'s error.
func fsName(p string) (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return "", err
	}
	return names[int64(st.Type)], nil
}
